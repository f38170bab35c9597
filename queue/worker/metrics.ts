/**
 * The worker's metrics. Counters are fed by the branch workers; per-branch gauges are read from
 * their state at scrape time, so a scrape always sees the current retained writes and retry.
 */
import { Counter, Gauge, type Registry } from "prom-client";
import { METRIC_NAMES } from "../metric-names.js";

export interface BranchGaugeSource {
  branchKey: string;
  retainedWrites: number;
  retainedBytes: number;
  /** Epoch ms of the oldest retained write's acceptance, if any. */
  oldestRetainedAt?: number;
  nextRetryAt?: number;
  retryingSince?: number;
  intakePaused: boolean;
}

export type PushOutcome = "landed" | "rejected" | "failed" | "replyLost";
export type FetchReason = "baseline" | "periodic" | "notice" | "rejected" | "lostReply" | "retry";

export interface WorkerMetrics {
  commit(branch: string): void;
  push(branch: string, outcome: PushOutcome): void;
  replay(branch: string, writes: number): void;
  contentionRetry(branch: string): void;
  fetch(branch: string, reason: FetchReason): void;
  /** A write settled as refused (never committed); reason is the rule's CamelCase name. */
  refused(branch: string, target: string, reason: string): void;
}

export const noMetrics: WorkerMetrics = {
  commit() {},
  push() {},
  replay() {},
  contentionRetry() {},
  fetch() {},
  refused() {},
};

export function createWorkerMetrics(
  registry: Registry,
  branches: () => BranchGaugeSource[],
  now: () => number = Date.now,
): WorkerMetrics {
  const commits = new Counter({
    name: "applygate_worker_commits_total",
    help: "Commits written by branch workers (replays included)",
    labelNames: ["branch"],
    registers: [registry],
  });
  const pushes = new Counter({
    name: "applygate_worker_pushes_total",
    help: "Pushes by outcome: landed, rejected (branch moved), failed, replyLost (landed, reply lost)",
    labelNames: ["branch", "outcome"],
    registers: [registry],
  });
  const replays = new Counter({
    name: "applygate_worker_replayed_writes_total",
    help: "Pending writes replayed onto a new remote tip",
    labelNames: ["branch"],
    registers: [registry],
  });
  const contention = new Counter({
    name: "applygate_worker_contention_retries_total",
    help: "Push cycles retried after a rejection",
    labelNames: ["branch"],
    registers: [registry],
  });
  const fetches = new Counter({
    name: "applygate_worker_fetches_total",
    help: "Reads of the remote tip by reason",
    labelNames: ["branch", "reason"],
    registers: [registry],
  });
  const refusedWrites = new Counter({
    name: "applygate_worker_refused_writes_total",
    help: "Writes settled as refused by the branch worker (never committed), by GitTarget and reason",
    labelNames: ["branch", "target", "reason"],
    registers: [registry],
  });
  const gauge = (name: string, help: string, value: (b: BranchGaugeSource) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ["branch"],
      registers: [registry],
      collect() {
        this.reset();
        for (const b of branches()) this.set({ branch: b.branchKey }, value(b));
      },
    });
  gauge("applygate_branch_retained_writes", "Writes accepted and not yet published", (b) => b.retainedWrites);
  gauge("applygate_branch_retained_bytes", "Bytes charged for retained writes", (b) => b.retainedBytes);
  gauge("applygate_branch_oldest_retained_write_age_seconds", "Age of the oldest retained write", (b) =>
    b.oldestRetainedAt === undefined ? 0 : Math.max(0, (now() - b.oldestRetainedAt) / 1000),
  );
  gauge("applygate_branch_next_retry_timestamp_seconds", "When the next publication attempt is due", (b) =>
    b.nextRetryAt === undefined ? 0 : b.nextRetryAt / 1000,
  );
  // The two gauges alerts watch are spelled out in full, so test/manifests can read their
  // registration (name and labels) from this source.
  new Gauge({
    name: METRIC_NAMES.branchIntakePaused,
    help: "1 while the branch refuses new writes",
    labelNames: ["branch"],
    registers: [registry],
    collect() {
      this.reset();
      for (const b of branches()) this.set({ branch: b.branchKey }, b.intakePaused ? 1 : 0);
    },
  });
  new Gauge({
    name: METRIC_NAMES.branchRetryingSeconds,
    help: "Seconds since publication started retrying",
    labelNames: ["branch"],
    registers: [registry],
    collect() {
      this.reset();
      for (const b of branches())
        this.set(
          { branch: b.branchKey },
          b.retryingSince === undefined ? 0 : Math.max(0, (now() - b.retryingSince) / 1000),
        );
    },
  });
  return {
    commit: (branch) => commits.inc({ branch }),
    push: (branch, outcome) => pushes.inc({ branch, outcome }),
    replay: (branch, n) => replays.inc({ branch }, n),
    contentionRetry: (branch) => contention.inc({ branch }),
    fetch: (branch, reason) => fetches.inc({ branch, reason }),
    refused: (branch, target, reason) => refusedWrites.inc({ branch, target, reason }),
  };
}
