/**
 * "Is this commit still the tip?" for an executor's recheck before it resumes or syncs (and after
 * it records the operation): the tip the branch's owner last observed or published, as the branch
 * worker records it in Redis (`branchKeys(prefix, key).tip`). An attempt is sent for the tip its
 * flush published, so it is Stale exactly when that record has moved on. Just before the write
 * that starts the apply, `FreshnessCheck` asks it again together with the edit recheck.
 *
 * No record answers true. The worker records the tip before it tells the decision core of it, so
 * a missing record means a worker that has not observed the branch since the key was introduced,
 * an empty branch, or a Redis that lost the key: none of them proves the tip moved, and a Stale
 * answer would only send the same attempt again. The executor's other checks (the artifact, the
 * recorded operation) still stand.
 */
import type { Redis } from "ioredis";
import type { Attempt } from "../queue/contract.js";
import { StatusReason } from "../queue/crds/reasons.js";
import { type Freshness, readFreshness } from "../queue/freshness.js";
import { readTip } from "../queue/records.js";

export type TipCheck = (attempt: Pick<Attempt, "branchKey" | "commit">) => Promise<boolean>;

export function redisTipCheck(redis: Redis, prefix: string): TipCheck {
  return async (attempt) => {
    const tip = await readTip(redis, prefix, attempt.branchKey);
    return tip === undefined || tip === attempt.commit;
  };
}

/** The last look before the write that starts an apply: the tip and the edit recheck (`readFreshness`). */
export type FreshnessCheck = (attempt: Attempt) => Promise<Freshness>;

export function redisFreshnessCheck(redis: Redis, prefix: string): FreshnessCheck {
  return (attempt) => readFreshness(redis, prefix, attempt);
}

/** Why an attempt that is not fresh ends Stale (undefined when it is fresh). */
export function staleBecause(
  f: Freshness,
  attempt: Attempt,
): { reason: StatusReason; message: string } | undefined {
  if (f === "moved")
    return {
      reason: StatusReason.Stale,
      message: `${attempt.commit} is no longer the tip of ${attempt.branch}`,
    };
  if (f === "edited")
    return {
      reason: StatusReason.EditedAfterFlush,
      message: `a write to ${attempt.editsAfter?.folders.join(", ")} was accepted after the flush of ${attempt.commit}: applying it would run the older commit over that edit`,
    };
  return undefined;
}
