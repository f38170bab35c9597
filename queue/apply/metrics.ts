/** The decisions' metrics. */
import { Counter, type Registry } from "prom-client";
import type { ApplierKind } from "../contract.js";
import { METRIC_NAMES } from "../metric-names.js";

export const APPLY_WINDOW_COLLISIONS_TOTAL = METRIC_NAMES.applyWindowCollisionsTotal;
/** Watched applier writes by judgement; no alert watches it, so it is not in METRIC_NAMES. */
export const APPLY_ECHOES_TOTAL = "applygate_apply_echoes_total";

export interface ApplyMetrics {
  /** A late apply over a newer API edit was withheld in an apply window. */
  collision(kind: ApplierKind): void;
  /** A watched write of an applier's own managers was judged. */
  echo(kind: ApplierKind | "none", outcome: string): void;
}

export const noApplyMetrics: ApplyMetrics = { collision() {}, echo() {} };

export function createApplyMetrics(registry: Registry): ApplyMetrics {
  const collisions = new Counter({
    name: METRIC_NAMES.applyWindowCollisionsTotal,
    help: "Late applies over a newer API edit withheld in an apply window (a Repair became due)",
    labelNames: ["applier_kind"],
    registers: [registry],
  });
  const echoes = new Counter({
    name: APPLY_ECHOES_TOTAL,
    help: "Watched writes of an applier's own managers, by the decision core's judgement",
    labelNames: ["applier_kind", "outcome"],
    registers: [registry],
  });
  return {
    collision: (kind) => collisions.inc({ applier_kind: kind }),
    echo: (kind, outcome) => echoes.inc({ applier_kind: kind, outcome }),
  };
}
