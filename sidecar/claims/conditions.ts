/**
 * metav1.Condition bookkeeping for claims (pure). A condition's lastTransitionTime moves only when
 * its status changes, so `kubectl wait --for=condition=Ready` and printer columns read what they
 * expect; a write that changes nothing is detected so the reconciler can skip it.
 */
import type { Condition, ConditionStatus } from "../../queue/crds/index.js";
import { StatusReason } from "../../queue/crds/reasons.js";
import { conditionIn, type StoredCondition } from "../../queue/kube/index.js";

export type { Condition, ConditionStatus } from "../../queue/crds/index.js";

/** A condition as a decision states it; the time is filled in when it is merged. */
export interface ConditionInput {
  type: string;
  status: ConditionStatus;
  reason: string;
  message?: string;
  observedGeneration?: number;
}

/** The order claim conditions are kept in, so `kubectl describe` reads the same every time. */
export const CONDITION_ORDER = ["Ready", "InControl", "Configured"];

const MAX_MESSAGE = 32_768;
const REASON = /^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/;

/** A reason the API server accepts: CamelCase letters and digits; anything else becomes Unknown. */
export function safeReason(reason: string): string {
  return REASON.test(reason) && reason.length <= 1024 ? reason : StatusReason.Unknown;
}

const iso = (now: Date | string) => (typeof now === "string" ? now : now.toISOString());

/**
 * Returns the list with `input` set: same status keeps its lastTransitionTime, a new status takes
 * `now`. The other conditions are kept as stored (queue/kube's `storedConditionsOf`).
 */
export function setCondition<C extends StoredCondition>(
  conditions: readonly C[] | undefined,
  input: ConditionInput,
  now: Date | string,
): (C | Condition)[] {
  const list: (C | Condition)[] = [...(conditions ?? [])];
  const i = list.findIndex((c) => c.type === input.type);
  const previous = i >= 0 ? conditionIn(list, input.type) : undefined;
  const next: Condition = {
    type: input.type,
    status: input.status,
    reason: safeReason(input.reason),
    message: (input.message ?? "").slice(0, MAX_MESSAGE),
    lastTransitionTime: previous && previous.status === input.status ? previous.lastTransitionTime : iso(now),
    ...(input.observedGeneration !== undefined ? { observedGeneration: input.observedGeneration } : {}),
  };
  if (i >= 0) list[i] = next;
  else list.push(next);
  return sortConditions(list);
}

/** Sets several conditions at once, in order. */
export function setConditions<C extends StoredCondition>(
  conditions: readonly C[] | undefined,
  inputs: readonly ConditionInput[],
  now: Date | string,
): (C | Condition)[] {
  let list: (C | Condition)[] = [...(conditions ?? [])];
  for (const c of inputs) list = setCondition(list, c, now);
  return list;
}

export function findCondition(
  conditions: readonly Condition[] | undefined,
  type: string,
): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}

export function isConditionTrue(conditions: readonly Condition[] | undefined, type: string): boolean {
  return findCondition(conditions, type)?.status === "True";
}

/** True when both lists say the same (times included), ignoring order. */
export function sameConditions(
  a: readonly StoredCondition[] | undefined,
  b: readonly StoredCondition[] | undefined,
): boolean {
  const x = sortConditions([...(a ?? [])]);
  const y = sortConditions([...(b ?? [])]);
  if (x.length !== y.length) return false;
  return x.every((c, i) => {
    const d = y[i]!;
    return (
      c.type === d.type &&
      c.status === d.status &&
      c.reason === d.reason &&
      c.message === d.message &&
      c.lastTransitionTime === d.lastTransitionTime &&
      c.observedGeneration === d.observedGeneration
    );
  });
}

function sortConditions<C extends StoredCondition>(list: C[]): C[] {
  const rank = (t: string) => {
    const i = CONDITION_ORDER.indexOf(t);
    return i < 0 ? CONDITION_ORDER.length : i;
  };
  return list.sort((a, b) => rank(a.type) - rank(b.type) || a.type.localeCompare(b.type));
}

/** One line for logs and Event notes: `Ready=True (Suspended)`. */
export function describeCondition(c: Pick<Condition, "type" | "status" | "reason">): string {
  return `${c.type}=${c.status} (${c.reason})`;
}
