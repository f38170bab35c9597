/**
 * Ownership of one branch: a lease in Redis (`<replica>:<fence>`, expiring unless renewed) and a
 * fencing number that grows with every new owner. Every write the worker makes to the branch's
 * Redis state checks the lease in the same script, and the worker checks it before every push, so
 * a replica that lost the branch stops writing it. The compare-and-swap push is what protects Git
 * from the window between that check and the push.
 */
import type { Redis } from "ioredis";
import { branchKeys, branchKeys as branchKeysOf } from "../keys.js";
import { evalScript, scriptPipeline } from "../redis.js";

export const DEFAULT_LEASE_MS = 10_000;

/**
 * Takes a free lease (or keeps our own). A free lease a replica handed over (KEYS[3] names it) is
 * not taken back by that replica, nor by one that does not take hand-overs now (ARGV[3] ~= '1'):
 * the answer is then the marker's time left (ms), a number, where a lease held answers nil.
 */
const ACQUIRE = `
local cur = redis.call('GET', KEYS[1])
if cur then
  if string.sub(cur, 1, string.len(ARGV[1]) + 1) == ARGV[1] .. ':' then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return cur
  end
  return false
end
local handoff = redis.call('GET', KEYS[3])
if handoff then
  if handoff == ARGV[1] or ARGV[3] ~= '1' then
    return math.max(1, redis.call('PTTL', KEYS[3]))
  end
  redis.call('DEL', KEYS[3])
end
local fence = redis.call('INCR', KEYS[2])
local value = ARGV[1] .. ':' .. fence
redis.call('SET', KEYS[1], value, 'PX', ARGV[2])
return value
`;

const RENEW = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
`;

/** Gives the lease back and marks it handed over by ARGV[2] for ARGV[3] ms. */
const HAND_OVER = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
`;

const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
`;

/**
 * A write to a branch's Redis state that happens only while `token` still holds the lease, checked
 * in the same script. `body` is Lua seeing the lease as KEYS[1] and the token as ARGV[1], then its
 * own keys (KEYS[2]...) and arguments (ARGV[2]...). The write resolves false when the lease is not
 * the caller's: nothing was written.
 */
export function fencedWrite(body: string) {
  const script = `if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end\n${body.trim()}\nreturn 1\n`;
  return async (redis: Redis, leaseKey: string, token: string, keys: string[], args: string[]) =>
    (await evalScript(redis, script, 1 + keys.length, leaseKey, ...keys, token, ...args)) === 1;
}

/**
 * Takes every lease of `branchKeys` nobody holds (or that `replicaId` holds already), pipelined:
 * one round trip for a whole sweep, where taking them one by one cost a round trip each. Returns
 * the leases taken, for the ones held by another replica how long until theirs lapses (ms), and
 * the free ones left because they were handed over (never taken back by the replica that handed
 * them over; by others only with `takeHandedOver`), whose marker lapses in `heldForMs` too.
 */
export async function acquireLeases(
  redis: Redis,
  prefix: string,
  branchKeys: string[],
  replicaId: string,
  ttlMs = DEFAULT_LEASE_MS,
  takeHandedOver = true,
): Promise<{ taken: BranchLease[]; heldForMs: number[]; handedOver: string[] }> {
  const taken: BranchLease[] = [];
  const heldForMs: number[] = [];
  const handedOver: string[] = [];
  for (let i = 0; i < branchKeys.length; i += ACQUIRE_CHUNK) {
    const chunk = branchKeys.slice(i, i + ACQUIRE_CHUNK);
    const { pipe, script: acquire } = scriptPipeline(redis, ACQUIRE);
    for (const key of chunk) {
      const k = branchKeysOf(prefix, key);
      acquire(3, k.lease, k.fence, k.handoff, replicaId, String(ttlMs), takeHandedOver ? "1" : "0");
      pipe.pttl(k.lease);
    }
    const replies = (await pipe.exec()) ?? [];
    chunk.forEach((key, j) => {
      const [err, value] = replies[2 * j] ?? [];
      if (err) throw err;
      if (typeof value === "string") {
        const lease = new BranchLease(redis, prefix, key, replicaId, ttlMs);
        lease.token = value;
        taken.push(lease);
        return;
      }
      if (typeof value === "number") {
        handedOver.push(key);
        heldForMs.push(value);
        return;
      }
      const pttl = Number(replies[2 * j + 1]?.[1]);
      if (pttl > 0) heldForMs.push(pttl);
    });
  }
  return { taken, heldForMs, handedOver };
}

/** Leases asked for in one pipeline. */
const ACQUIRE_CHUNK = 500;

export class BranchLease {
  /** `<replica>:<fence>` while held. */
  token: string | undefined;

  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    readonly branchKey: string,
    readonly replicaId: string,
    readonly ttlMs = DEFAULT_LEASE_MS,
  ) {
    if (replicaId.includes(":")) throw new Error("a replica id must not contain ':'");
  }

  get fence(): number | undefined {
    return this.token ? Number(this.token.slice(this.token.lastIndexOf(":") + 1)) : undefined;
  }

  private keys() {
    return branchKeys(this.prefix, this.branchKey);
  }

  /**
   * Takes the branch when nobody holds it (or we already do); one handed over is taken only with
   * `takeHandedOver`, and never by the replica that handed it over while its marker lives.
   */
  async acquire(takeHandedOver = true): Promise<boolean> {
    const k = this.keys();
    const value = (await evalScript(
      this.redis,
      ACQUIRE,
      3,
      k.lease,
      k.fence,
      k.handoff,
      this.replicaId,
      String(this.ttlMs),
      takeHandedOver ? "1" : "0",
    )) as string | number | null;
    this.token = typeof value === "string" ? value : undefined;
    return typeof value === "string";
  }

  /**
   * Gives the lease back as a hand-over: for `markerMs` this replica does not take it back, and
   * only a replica taking hand-overs (under its share) does; afterwards any replica takes it.
   */
  async handOver(markerMs: number): Promise<boolean> {
    if (!this.token) return false;
    const k = this.keys();
    const token = this.token;
    this.token = undefined;
    return (
      (await evalScript(
        this.redis,
        HAND_OVER,
        2,
        k.lease,
        k.handoff,
        token,
        this.replicaId,
        String(markerMs),
      )) === 1
    );
  }

  /** Extends the lease; false (and the token forgotten) when another replica holds it now. */
  async renew(): Promise<boolean> {
    if (!this.token) return false;
    const ok =
      (await evalScript(this.redis, RENEW, 1, this.keys().lease, this.token, String(this.ttlMs))) === 1;
    if (!ok) this.token = undefined;
    return ok;
  }

  /** True while Redis still names us the owner. */
  async holds(): Promise<boolean> {
    if (!this.token) return false;
    const cur = await this.redis.get(this.keys().lease);
    if (cur !== this.token) this.token = undefined;
    return cur !== null && cur === this.token;
  }

  async release(): Promise<void> {
    if (!this.token) return;
    await evalScript(this.redis, RELEASE, 1, this.keys().lease, this.token);
    this.token = undefined;
  }
}
