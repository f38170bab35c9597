/**
 * The sidecar's metrics, on a registry of its own: claims' Ready condition as the reconciler wrote
 * it, operations this process follows that are Unresolved, and counters of attempts taken and
 * operations ended. The reconciler and the executor host feed it; `/metrics` serves it.
 */
import { Counter, collectDefaultMetrics, Gauge, Registry } from "prom-client";
import { type ApplierKind, type ReportPhase, TERMINAL_PHASES } from "../queue/contract.js";
import { METRIC_NAMES, SIDECAR_METRIC_NAMES } from "../queue/metric-names.js";

export interface ClaimIdentity {
  kind: string;
  namespace: string;
  name: string;
}

/** What the claim reconciler tells the metrics. */
export interface ClaimMetrics {
  /** The Ready condition's status as last written (or found unchanged) on the claim. */
  claimReady(claim: ClaimIdentity, status: string | undefined): void;
  /** Every claim of `kind` that still exists; the series of any other claim of that kind go. */
  claimsPresent(kind: string, present: readonly ClaimIdentity[]): void;
}

/** What the executor host tells the metrics. */
export interface OperationMetrics {
  /** An attempt was taken from the attempts queue. */
  attempt(kind: ApplierKind): void;
  /** A phase was reported for the operation with `token` (or read from its record on recovery). */
  phase(kind: ApplierKind, token: string, phase: ReportPhase): void;
  /** This process no longer follows the operation with `token`. */
  forget(kind: ApplierKind, token: string): void;
}

export interface SidecarMetrics extends ClaimMetrics, OperationMetrics {
  registry: Registry;
  /** Where `applygate_sidecar_ready` reads readiness from at each scrape. */
  readyFrom(check: () => Promise<boolean>): void;
  /** The Prometheus text exposition of every metric. */
  text(): Promise<string>;
}

export interface SidecarMetricsOptions {
  /** Kinds whose Unresolved gauge starts at 0, so the series exists before anything happens. */
  kinds?: readonly ApplierKind[];
  /** Node process metrics (CPU, memory, event loop, handles); on for a served sidecar. */
  processMetrics?: boolean;
}

const claimKey = (c: ClaimIdentity) => `${c.kind}\u0000${c.namespace}\u0000${c.name}`;

export function createSidecarMetrics(opts: SidecarMetricsOptions = {}): SidecarMetrics {
  const registry = new Registry();
  if (opts.processMetrics) collectDefaultMetrics({ register: registry });

  const claimReady = new Gauge({
    name: METRIC_NAMES.claimReady,
    help: "1 when the claim's Ready condition is True, else 0.",
    labelNames: ["kind", "claim_namespace", "name"],
    registers: [registry],
  });
  let readyCheck: (() => Promise<boolean>) | undefined;
  new Gauge({
    name: METRIC_NAMES.sidecarReady,
    help: "1 while the sidecar is ready (Redis answers, every watch synced), else 0.",
    labelNames: ["applier_kind"],
    registers: [registry],
    async collect() {
      if (!readyCheck) return;
      const ready = await readyCheck().catch(() => false);
      for (const kind of opts.kinds ?? []) this.set({ applier_kind: kind }, ready ? 1 : 0);
    },
  });
  const labels = (c: ClaimIdentity) => ({ kind: c.kind, claim_namespace: c.namespace, name: c.name });
  const unresolved = new Gauge({
    name: METRIC_NAMES.operationsUnresolved,
    help: "Operations this sidecar follows that are in phase Unresolved.",
    labelNames: ["applier_kind"],
    registers: [registry],
  });
  const operations = new Counter({
    name: SIDECAR_METRIC_NAMES.operationsTotal,
    help: "Operations this sidecar saw end, by terminal phase.",
    labelNames: ["applier_kind", "phase"],
    registers: [registry],
  });
  const attempts = new Counter({
    name: SIDECAR_METRIC_NAMES.attemptsTotal,
    help: "Attempts this sidecar took from its attempts queue.",
    labelNames: ["applier_kind"],
    registers: [registry],
  });
  for (const kind of opts.kinds ?? []) {
    unresolved.set({ applier_kind: kind }, 0);
    attempts.inc({ applier_kind: kind }, 0);
  }

  const claims = new Map<string, ClaimIdentity>();
  const unresolvedTokens = new Map<ApplierKind, Set<string>>();
  const tokensOf = (kind: ApplierKind) => {
    let set = unresolvedTokens.get(kind);
    if (!set) unresolvedTokens.set(kind, (set = new Set()));
    return set;
  };
  const settle = (kind: ApplierKind, token: string) => {
    const set = tokensOf(kind);
    if (set.delete(token)) unresolved.set({ applier_kind: kind }, set.size);
  };

  return {
    registry,
    text: () => registry.metrics(),
    readyFrom(check) {
      readyCheck = check;
    },
    claimReady(claim, status) {
      claims.set(claimKey(claim), claim);
      claimReady.set(labels(claim), status === "True" ? 1 : 0);
    },
    claimsPresent(kind, present) {
      const keep = new Set(present.map(claimKey));
      for (const [key, claim] of claims) {
        if (claim.kind !== kind || keep.has(key)) continue;
        claims.delete(key);
        claimReady.remove(labels(claim));
      }
    },
    attempt(kind) {
      attempts.inc({ applier_kind: kind });
    },
    phase(kind, token, phase) {
      if (phase === "Unresolved") {
        const set = tokensOf(kind);
        set.add(token);
        unresolved.set({ applier_kind: kind }, set.size);
      } else {
        settle(kind, token);
      }
      if (TERMINAL_PHASES.includes(phase)) operations.inc({ applier_kind: kind, phase });
    },
    forget(kind, token) {
      settle(kind, token);
    },
  };
}
