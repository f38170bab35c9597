/**
 * The branch's remote tip as its owner last saw it, kept in Redis (`branchKeys(…).tip`) for the
 * sidecars (`readTip` in queue/records.ts): an attempt is for the tip a flush's publication produced, and it is Stale only when
 * that tip moved. The owner writes it before it tells the decision core of the observation or
 * publication, so an attempt sent for a tip always finds that tip (or a newer one) recorded.
 */
import type { Redis } from "ioredis";
import { branchKeys } from "../keys.js";
import { LostLeaseError } from "./inbox.js";
import { fencedWrite } from "./lease.js";

// KEYS: lease, tip. ARGV: token, tip ("" = the branch is empty: no record).
const writeTip = fencedWrite(`
if ARGV[2] == '' then
  redis.call('DEL', KEYS[2])
else
  redis.call('SET', KEYS[2], ARGV[2])
end
`);

/** Records the tip, fenced by the lease; throws LostLeaseError when the caller no longer owns the branch. */
export async function recordTip(
  redis: Redis,
  prefix: string,
  branchKey: string,
  leaseToken: string,
  tip: string | undefined,
): Promise<void> {
  const keys = branchKeys(prefix, branchKey);
  if (!(await writeTip(redis, keys.lease, leaseToken, [keys.tip], [tip ?? ""])))
    throw new LostLeaseError(`lost the lease of ${branchKey}`);
}
