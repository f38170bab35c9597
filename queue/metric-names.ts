/**
 * Names of the metrics the gateway and the worker export and the alerts in
 * `manifests/monitoring/` watch. Register metrics with these constants (never a literal), so a
 * renamed metric fails a test instead of silently silencing an alert.
 *
 * test/manifests checks both sides: the PrometheusRule names only these metrics, and the source
 * registers every one of them (`name: METRIC_NAMES.<key>` in a prom-client metric) with the labels
 * in METRIC_LABELS.
 */
export const METRIC_NAMES = {
  /** Gauge {queue}: age in seconds of the oldest job waiting in the queue (0 when none). */
  queueOldestWaitingSeconds: "applygate_queue_oldest_waiting_seconds",
  /** Gauge {queue}: active jobs whose process died (lock ran out), or active past their deadline (attempts have none). */
  queueStuckJobs: "applygate_queue_stuck_jobs",
  /** Gauge {queue,state}: jobs per BullMQ state (waiting, active, delayed, failed, completed). */
  queueJobs: "applygate_queue_jobs",
  /** Counter {queue}: jobs that ended failed. */
  jobsFailedTotal: "applygate_jobs_failed_total",
  /** Gauge {applier_kind}: operations currently in phase Unresolved. */
  operationsUnresolved: "applygate_operations_unresolved",
  /** Gauge {branch}: 1 while a branch refuses new writes until retained ones are published. */
  branchIntakePaused: "applygate_branch_intake_paused",
  /** Gauge {branch}: seconds since publication of the branch started retrying (0 when published). */
  branchRetryingSeconds: "applygate_branch_retrying_seconds",
  /**
   * Gauge {kind,claim_namespace,name}: 1 when the claim's Ready condition is True, else 0. Not
   * `namespace`: Prometheus sets that label at scrape to the sidecar pod's namespace.
   */
  claimReady: "applygate_claim_ready",
  /**
   * Gauge {applier_kind}: 1 while the sidecar's /readyz would answer 200 (Redis answers, every
   * watch synced). The sidecar has no readiness probe (it must not gate the applier's pod), so
   * this gauge and its alert are how a sidecar that is not ready shows.
   */
  sidecarReady: "applygate_sidecar_ready",
  /**
   * Counter {applier_kind}: late applies over a newer API edit withheld in an apply window (Git
   * keeps the edit and a Repair becomes due).
   */
  applyWindowCollisionsTotal: "applygate_apply_window_collisions_total",
} as const;

export type MetricName = (typeof METRIC_NAMES)[keyof typeof METRIC_NAMES];

/** Label names each metric carries, for registration and for the alerts' test. */
export const METRIC_LABELS = {
  [METRIC_NAMES.queueOldestWaitingSeconds]: ["queue"],
  [METRIC_NAMES.queueStuckJobs]: ["queue"],
  [METRIC_NAMES.queueJobs]: ["queue", "state"],
  [METRIC_NAMES.jobsFailedTotal]: ["queue"],
  [METRIC_NAMES.operationsUnresolved]: ["applier_kind"],
  [METRIC_NAMES.branchIntakePaused]: ["branch"],
  [METRIC_NAMES.branchRetryingSeconds]: ["branch"],
  [METRIC_NAMES.claimReady]: ["kind", "claim_namespace", "name"],
  [METRIC_NAMES.sidecarReady]: ["applier_kind"],
  [METRIC_NAMES.applyWindowCollisionsTotal]: ["applier_kind"],
} as const satisfies Record<MetricName, readonly string[]>;

/** All metric names, for membership checks. */
export const ALL_METRIC_NAMES: readonly MetricName[] = Object.values(METRIC_NAMES);

/**
 * Sidecar counters no alert watches (METRIC_NAMES holds exactly the watched ones, and a test
 * wants an alert for each of those); named here so the dashboard and docs share the spelling.
 */
export const SIDECAR_METRIC_NAMES = {
  /** Counter {applier_kind,phase}: operations the sidecar saw end, by terminal phase. */
  operationsTotal: "applygate_sidecar_operations_total",
  /** Counter {applier_kind}: attempts the sidecar took from its attempts queue. */
  attemptsTotal: "applygate_sidecar_attempts_total",
} as const;
