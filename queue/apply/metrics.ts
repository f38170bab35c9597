/** The decisions' metrics. */
import { Counter, type Registry } from "prom-client";
import type { ApplierKind } from "../contract.js";
import { METRIC_NAMES } from "../metric-names.js";

export const APPLY_WINDOW_COLLISIONS_TOTAL = METRIC_NAMES.applyWindowCollisionsTotal;

export interface ApplyMetrics {
  /** A late apply over a newer API edit was withheld in an apply window. */
  collision(kind: ApplierKind): void;
}

export const noApplyMetrics: ApplyMetrics = { collision() {} };

export function createApplyMetrics(registry: Registry): ApplyMetrics {
  const collisions = new Counter({
    name: METRIC_NAMES.applyWindowCollisionsTotal,
    help: "Late applies over a newer API edit withheld in an apply window (a Repair became due)",
    labelNames: ["applier_kind"],
    registers: [registry],
  });
  return { collision: (kind) => collisions.inc({ applier_kind: kind }) };
}
