/** The decisions' metrics. */
import { Counter, type Registry } from "prom-client";
import { APPLIER_KINDS, type ApplierKind } from "../contract.js";
import { METRIC_NAMES } from "../metric-names.js";

export const APPLY_WINDOW_COLLISIONS_TOTAL = METRIC_NAMES.applyWindowCollisionsTotal;
/** Watched applier writes by judgement; no alert watches it, so it is not in METRIC_NAMES. */
export const APPLY_ECHOES_TOTAL = "applygate_apply_echoes_total";
/** Snapshots judged stale: `discarded`, or `used` when the 5-minute bound let one through. */
export const STALE_SNAPSHOTS_TOTAL = "applygate_stale_snapshots_total";
/** Attempts the worker ended `AttemptLost`: no queue held them and no claim recorded them. */
export const ATTEMPTS_LOST_TOTAL = "applygate_attempts_lost_total";

export interface ApplyMetrics {
  /** A late apply over a newer API edit was withheld in an apply window. */
  collision(kind: ApplierKind): void;
  /** A watched write of an applier's own managers was judged. */
  echo(kind: ApplierKind | "none", outcome: string): void;
  /** A stale snapshot was discarded, or used under the 5-minute bound (once per snapshot). */
  staleSnapshot(outcome: "discarded" | "used"): void;
  /** An attempt nothing reported was ended `AttemptLost`. */
  attemptLost(kind: ApplierKind): void;
}

export const noApplyMetrics: ApplyMetrics = {
  collision() {},
  echo() {},
  staleSnapshot() {},
  attemptLost() {},
};

export function createApplyMetrics(registry: Registry): ApplyMetrics {
  const collisions = new Counter({
    name: METRIC_NAMES.applyWindowCollisionsTotal,
    help: "Late applies over a newer API edit withheld in an apply window (a Repair became due)",
    labelNames: ["applier_kind"],
    registers: [registry],
  });
  // A series from the start: the dashboard's panel and the rate behind the alert read 0, not nothing.
  for (const kind of APPLIER_KINDS) collisions.inc({ applier_kind: kind }, 0);
  const echoes = new Counter({
    name: APPLY_ECHOES_TOTAL,
    help: "Watched writes of an applier's own managers, by the decision core's judgement",
    labelNames: ["applier_kind", "outcome"],
    registers: [registry],
  });
  const stale = new Counter({
    name: STALE_SNAPSHOTS_TOTAL,
    help: "Snapshots collected while Git was ahead or across an apply: discarded, or used once held 5 minutes",
    labelNames: ["outcome"],
    registers: [registry],
  });
  const lost = new Counter({
    name: ATTEMPTS_LOST_TOTAL,
    help: "Attempts the worker ended AttemptLost: no queue held them and no claim recorded them at two checks",
    labelNames: ["applier_kind"],
    registers: [registry],
  });
  for (const kind of APPLIER_KINDS) lost.inc({ applier_kind: kind }, 0);
  return {
    attemptLost: (kind) => lost.inc({ applier_kind: kind }),
    staleSnapshot: (outcome) => stale.inc({ outcome }),
    collision: (kind) => collisions.inc({ applier_kind: kind }),
    echo: (kind, outcome) => echoes.inc({ applier_kind: kind, outcome }),
  };
}
