/** Kubernetes conditions the way fluxcd/pkg runtime/conditions sets them (pure). */
import { wireTime } from "../clock.js";

export interface Condition {
  type: string;
  status: "True" | "False" | "Unknown";
  observedGeneration?: number;
  lastTransitionTime: string;
  reason: string;
  message: string;
}

export const READY = "Ready";
export const RECONCILING = "Reconciling";
export const HEALTHY = "Healthy";

/**
 * Sets a condition; lastTransitionTime moves only when the status changes, as upstream, so a
 * reader can tell a real reconcile (Ready goes Unknown first) from a write that kept Ready.
 */
export function setCondition(
  list: Condition[] | undefined,
  c: Omit<Condition, "lastTransitionTime">,
  nowMs: number,
): Condition[] {
  const out = [...(list ?? [])];
  const i = out.findIndex((x) => x.type === c.type);
  const prev = i >= 0 ? out[i] : undefined;
  const next: Condition = {
    ...c,
    lastTransitionTime: prev && prev.status === c.status ? prev.lastTransitionTime : wireTime(nowMs),
  };
  if (i >= 0) out[i] = next;
  else out.push(next);
  return out;
}

export function removeCondition(list: Condition[] | undefined, type: string): Condition[] {
  return (list ?? []).filter((c) => c.type !== type);
}

export function getCondition(list: Condition[] | undefined, type: string): Condition | undefined {
  return list?.find((c) => c.type === type);
}

export function isTrue(list: Condition[] | undefined, type: string): boolean {
  return getCondition(list, type)?.status === "True";
}
