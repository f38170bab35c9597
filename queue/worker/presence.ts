/**
 * Worker replicas announce themselves in Redis: a heartbeat key per replica (TTL), and a sorted set
 * of replica ids scored by when each heartbeat lapses, in Redis time so the replicas' clocks do not
 * matter. One script refreshes ours, forgets the lapsed ones and answers how many replicas live and
 * how many branches are known: all the balancing decisions need from the others.
 */
import type { Redis } from "ioredis";
import { knownBranchesKey, replicaKey, replicasKey } from "../keys.js";
import { evalScript } from "../redis.js";

const ANNOUNCE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return {redis.call('ZCARD', KEYS[1]), redis.call('SCARD', KEYS[3])}
`;

const LEAVE = `
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2])
return 1
`;

export interface Presence {
  /** Replicas whose heartbeat lives, this one included. */
  live: number;
  /** Branches known (the set the sweeps read). */
  known: number;
}

/** Refreshes this replica's heartbeat for `ttlMs` and reads the fleet. */
export async function announce(
  redis: Redis,
  prefix: string,
  replicaId: string,
  ttlMs: number,
  owned: number,
): Promise<Presence> {
  const [live, known] = (await evalScript(
    redis,
    ANNOUNCE,
    3,
    replicasKey(prefix),
    replicaKey(prefix, replicaId),
    knownBranchesKey(prefix),
    replicaId,
    JSON.stringify({ owned, at: new Date().toISOString() }),
    String(ttlMs),
  )) as [number, number];
  return { live: Number(live), known: Number(known) };
}

/** A replica stopping says so at once: the others' shares grow now, not when its heartbeat lapses. */
export async function leave(redis: Redis, prefix: string, replicaId: string): Promise<void> {
  await evalScript(redis, LEAVE, 2, replicasKey(prefix), replicaKey(prefix, replicaId), replicaId);
}
