/**
 * "Is this commit still the tip?" for an executor's recheck before it resumes or syncs (and after
 * it records the operation): the tip the branch's owner last observed or published, as the branch
 * worker records it in Redis (`branchKeys(prefix, key).tip`). An attempt is sent for the tip its
 * flush published, so it is Stale exactly when that record has moved on.
 *
 * No record answers true. The worker records the tip before it tells the decision core of it, so
 * a missing record means a worker that has not observed the branch since the key was introduced,
 * an empty branch, or a Redis that lost the key: none of them proves the tip moved, and a Stale
 * answer would only send the same attempt again. The executor's other checks (the artifact, the
 * recorded operation) still stand.
 */
import type { Redis } from "ioredis";
import type { Attempt } from "../queue/contract.js";
import { readTip } from "../queue/worker/tip-record.js";

export type TipCheck = (attempt: Pick<Attempt, "branchKey" | "commit">) => Promise<boolean>;

export function redisTipCheck(redis: Redis, prefix: string): TipCheck {
  return async (attempt) => {
    const tip = await readTip(redis, prefix, attempt.branchKey);
    return tip === undefined || tip === attempt.commit;
  };
}
