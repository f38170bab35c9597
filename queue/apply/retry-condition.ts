/**
 * The claim's Retrying condition (pure): what the claim waits for before its next attempt, in the
 * words a user reads with `kubectl get <claim> -o yaml` — the commit, which attempt comes next and
 * when. True while it waits (the branch worker's backoff, or the applier's own retry inside an
 * operation), False once nothing is waited for. Written by the branch worker only; the sidecar's
 * conditions are kept as they are.
 */
import { type Condition, objectMeta } from "../crds/common.js";
import { StatusReason } from "../crds/reasons.js";
import { type RetryView, retryMessage } from "../decide/index.js";
import { conditionIn, fieldOf, storedConditionsOf } from "../kube/readers.js";
import type { KObject } from "../kube/resources.js";

export const RETRYING_CONDITION = "Retrying";

export { inWords, retryMessage } from "../decide/index.js";

/** The condition a claim shows for `retry` (null: nothing waited for). */
export function retryCondition(retry: RetryView | null, now: number): Omit<Condition, "lastTransitionTime"> {
  if (retry === null)
    return {
      type: RETRYING_CONDITION,
      status: "False",
      reason: StatusReason.NoRetryPending,
      message: "no attempt is waiting for a retry",
    };
  return {
    type: RETRYING_CONDITION,
    status: "True",
    reason: retry.by === "applier" ? StatusReason.ApplierRetrying : StatusReason.BackingOff,
    message: retryMessage(retry, now),
  };
}

/**
 * The status merge patch that makes the claim show `retry`, from the claim as read now; undefined
 * when it already does (same status, reason and message). Other conditions are kept as they are.
 */
export function retryPatch(
  current: KObject,
  retry: RetryView | null,
  now: number,
): Record<string, unknown> | undefined {
  const list = storedConditionsOf(current) ?? [];
  const prev = conditionIn(list, RETRYING_CONDITION);
  // A claim that never waited gets no condition: nothing to say.
  if (retry === null && !prev) return undefined;
  const wanted = retryCondition(retry, now);
  if (prev && prev.status === wanted.status && prev.reason === wanted.reason && retry === null)
    return undefined;
  const generation = fieldOf(objectMeta, current.metadata, "generation");
  const next: Condition = {
    ...wanted,
    lastTransitionTime:
      prev && prev.status === wanted.status ? prev.lastTransitionTime : new Date(now).toISOString(),
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
  };
  if (prev && JSON.stringify(prev) === JSON.stringify(next)) return undefined;
  // A merge patch replaces the conditions list whole.
  return { conditions: [...list.filter((c) => c.type !== RETRYING_CONDITION), next] };
}
