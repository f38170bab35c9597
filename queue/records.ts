/**
 * The records the processes hand each other through Redis, beside the keys they live under
 * (queue/keys.ts) and the inbox's entries (queue/intake.ts): what each holds and how it is read.
 * Each has one writer; a reader in another process reads it here, never through the writer.
 *
 * - The tip record: the branch's remote tip as its owner last saw it. Written (fenced by the
 *   lease) by the branch worker before it tells the decisions (queue/worker/tip-record.ts); read
 *   by the sidecars' recheck, which answers Stale exactly when it moved.
 * - The apply state: the apply epoch and whether Git is ahead of the cluster. Written with the
 *   decision state in one fenced write (queue/apply/store.ts); read by the watch plane.
 * - The worker's own publications: the commits it pushed on the branch (each the commits after a
 *   base up to a tip), kept in the decision state; read by the executor's approval recheck, which
 *   leaves them out of what an apply brings, as the worker does.
 * - Superseded operations (an operation's end mark): a notice kept with a TTL and announced on a
 *   channel by the decisions; read by the sidecar following the operation.
 */
import type { Redis } from "ioredis";
import { SupersededNotice } from "./contract.js";
import { branchKeys, SUPERSEDED_TTL_SECONDS, supersededChannel, supersededKey } from "./keys.js";

/** The branch's recorded remote tip (`branchKeys(…).tip`), or undefined when none is recorded. */
export async function readTip(redis: Redis, prefix: string, branchKey: string): Promise<string | undefined> {
  return (await redis.get(branchKeys(prefix, branchKey).tip)) ?? undefined;
}

/** What the watch plane reads of a branch's decisions (`branchKeys(…).applyState`). */
export interface ApplyState {
  epoch: number;
  gitAhead: boolean;
}

/** The branch's published apply state, or undefined when none is (no worker decided for it yet). */
export async function readApplyState(
  redis: Redis,
  prefix: string,
  branchKey: string,
): Promise<ApplyState | undefined> {
  const raw = await redis.get(branchKeys(prefix, branchKey).applyState);
  if (!raw) return undefined;
  try {
    const v = JSON.parse(raw) as Partial<ApplyState>;
    return typeof v.epoch === "number" && typeof v.gitAhead === "boolean"
      ? { epoch: v.epoch, gitAhead: v.gitAhead }
      : undefined;
  } catch {
    return undefined;
  }
}

/** One publication of the branch worker: the commits after `base` up to `tip`. */
export interface OwnPublication {
  tip: string;
  base: string | null;
}

/**
 * The worker's own publications on a branch, newest last, as its decision state
 * (`branchKeys(…).decisions`, field `published`) holds them; none when nothing is recorded or the
 * state cannot be read (every commit is then foreign, as for a branch no worker decided for).
 */
export async function readOwnPublications(
  redis: Redis,
  prefix: string,
  branchKey: string,
): Promise<readonly OwnPublication[]> {
  const raw = await redis.get(branchKeys(prefix, branchKey).decisions);
  if (!raw) return [];
  try {
    return (JSON.parse(raw) as { published?: OwnPublication[] } | null)?.published ?? [];
  } catch {
    return [];
  }
}

/** Keeps a superseded operation's notice (for a follower that starts later) and announces it. */
export async function keepSuperseded(redis: Redis, prefix: string, notice: SupersededNotice): Promise<void> {
  const json = JSON.stringify(notice);
  await redis
    .multi()
    .set(supersededKey(prefix, notice.token), json, "EX", SUPERSEDED_TTL_SECONDS)
    .publish(supersededChannel(prefix), json)
    .exec();
}

/** A superseded notice as kept or announced; undefined when it is not one. */
export function parseSuperseded(json: string | null): SupersededNotice | undefined {
  if (json === null) return undefined;
  try {
    const n = SupersededNotice.safeParse(JSON.parse(json));
    return n.success ? n.data : undefined;
  } catch {
    return undefined;
  }
}

/** The notice kept for operation `token`, if the worker found it superseded. */
export async function readSuperseded(
  redis: Redis,
  prefix: string,
  token: string,
): Promise<SupersededNotice | undefined> {
  return parseSuperseded(await redis.get(supersededKey(prefix, token)));
}
