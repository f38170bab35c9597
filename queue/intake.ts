/**
 * How the gateway hands work to the worker. Writes go to their branch's inbox in one Redis script
 * that is the intake gate (the pause latch and the budget, charged as the write is appended), then a deduplicated `branches`
 * signal wakes the branch's owner. Notices go to the `notices` queue with a job id derived from
 * the delivery, so a redelivered webhook or a retried refusal is queued once.
 */
import { createHash } from "node:crypto";
import type { Queue } from "bullmq";
import type { Redis } from "ioredis";
import type { AcceptedWrite, Notice } from "./contract.js";
import { branchKeys, branchSignalOptions, type InboxKind, knownBranchesKey } from "./keys.js";

/** Seconds a client is told to wait when the worker paused intake without saying for how long. */
export const DEFAULT_PAUSED_RETRY_AFTER_SECONDS = 5;
/** Charged per write beyond its payload, so the intake budget also bounds the number of writes. */
export const WRITE_OVERHEAD_BYTES = 1024;

/** What a write costs against its branch's intake budget: its encoded bytes plus the overhead. */
export function writeCharge(payloadBytes: number): number {
  return payloadBytes + WRITE_OVERHEAD_BYTES;
}

export type AcceptWriteResult =
  | { accepted: true; id: string; entryId: string }
  | { accepted: false; retryAfterSeconds: number };

// The intake gate, one atomic step: the pause latch, the budget, the charge and the append.
// KEYS: intake hash, inbox stream, known-branches set. ARGV: branch key, write JSON, default retry,
// overhead bytes. A write whose charge would take the branch past its budget is refused: always
// while a publication retry is pending (and the refusal latches the pause, which only a landed
// push releases), otherwise unless the branch holds nothing (a lone write larger than the budget
// passes on a healthy branch). Without a budget (no worker has run yet) only the latch applies.
const ACCEPT_WRITE_LUA = `
local h = redis.call('HMGET', KEYS[1], 'paused', 'retryAfter', 'charged', 'budget', 'retrying')
local function refuse()
  local after = tonumber(h[2])
  if after == nil or after < 1 then after = tonumber(ARGV[3]) end
  return {0, tostring(math.ceil(after))}
end
if h[1] == '1' then return refuse() end
local cost = string.len(ARGV[2]) + tonumber(ARGV[4])
local charged = tonumber(h[3]) or 0
local budget = tonumber(h[4])
if budget ~= nil and charged + cost > budget and (h[5] == '1' or charged > 0) then
  if h[5] == '1' then redis.call('HSET', KEYS[1], 'paused', '1') end
  return refuse()
end
local entry = redis.call('XADD', KEYS[2], '*', 'kind', 'write', 'data', ARGV[2], 'charge', tostring(cost))
redis.call('HINCRBY', KEYS[1], 'charged', cost)
redis.call('SADD', KEYS[3], ARGV[1])
return {1, entry}
`;

type WithAcceptWrite = Redis & {
  applygateAcceptWrite(
    intake: string,
    inbox: string,
    known: string,
    branchKey: string,
    data: string,
    retryAfter: string,
    overhead: string,
  ): Promise<[number, string]>;
};

function withScript(redis: Redis): WithAcceptWrite {
  const r = redis as WithAcceptWrite;
  if (typeof r.applygateAcceptWrite !== "function") {
    redis.defineCommand("applygateAcceptWrite", { numberOfKeys: 3, lua: ACCEPT_WRITE_LUA });
  }
  return r;
}

/**
 * Appends an accepted write to its branch's inbox, charged to the branch's intake budget, unless
 * the intake gate refuses it (paused, or the charge would pass the budget), then signals the branch. Once the script has run the write is durable: a failed signal is not an
 * error for the caller (the owner finds the branch in the known-branches set when it sweeps), so
 * the caller never answers "failed" for a write Redis already holds. Throws only when Redis did
 * not take the write, in which case nothing was written.
 */
export async function acceptWrite(
  redis: Redis,
  prefix: string,
  write: AcceptedWrite,
  branches: Queue,
  onSignalError: (err: unknown) => void = () => {},
  /** The write as JSON, when the caller already encoded it. */
  encoded: string = JSON.stringify(write),
): Promise<AcceptWriteResult> {
  const keys = branchKeys(prefix, write.branchKey);
  const [ok, value] = await withScript(redis).applygateAcceptWrite(
    keys.intake,
    keys.inbox,
    knownBranchesKey(prefix),
    write.branchKey,
    encoded,
    String(DEFAULT_PAUSED_RETRY_AFTER_SECONDS),
    String(WRITE_OVERHEAD_BYTES),
  );
  if (ok !== 1) return { accepted: false, retryAfterSeconds: Number(value) };
  try {
    await signalBranch(branches, write.branchKey);
  } catch (err) {
    onSignalError(err);
  }
  return { accepted: true, id: write.id, entryId: value };
}

/**
 * Appends a notice (a push, a refusal, a report) to a branch's inbox. Notices are not writes: they
 * carry no charge and never pass the intake gate, so a paused branch still hears of them.
 */
export async function appendNotice(
  redis: Redis,
  prefix: string,
  branchKey: string,
  kind: Exclude<InboxKind, "write">,
  data: unknown,
): Promise<void> {
  await redis
    .multi()
    .xadd(branchKeys(prefix, branchKey).inbox, "*", "kind", kind, "data", JSON.stringify(data))
    .sadd(knownBranchesKey(prefix), branchKey)
    .exec();
}

/**
 * Resolves once at least `replicas` replicas acknowledged every write this connection made so far
 * (Redis `WAIT`); throws when fewer did within `timeoutMs`. What an asynchronous replica has not
 * received yet is lost if the primary dies and that replica is promoted, so a gateway asked to
 * acknowledge only replicated work calls this after the enqueue and before answering.
 */
export async function replicated(redis: Redis, replicas: number, timeoutMs: number): Promise<void> {
  if (replicas <= 0) return;
  const acknowledged = await redis.wait(replicas, timeoutMs);
  if (acknowledged < replicas)
    throw new Error(`${acknowledged} of ${replicas} replicas acknowledged within ${timeoutMs} ms`);
}

/** Adds the deduplicated "this branch has work" job. */
export async function signalBranch(branches: Queue, branchKey: string): Promise<void> {
  await branches.add("work", { branchKey }, branchSignalOptions(branchKey));
}

/** Job id of a notice: stable for a delivery, so BullMQ keeps one job however often it arrives. */
export function noticeJobId(notice: Notice): string {
  if (notice.type === "refusal") return notice.id;
  const digest = createHash("sha256")
    .update(`${notice.provider.namespace}/${notice.provider.name}`)
    .update(notice.deliveryId)
    .digest("hex");
  return `push-${digest}`;
}

/** How long finished notice jobs (and so their idempotency) are kept. */
export const NOTICE_RETENTION = { age: 24 * 3600, count: 50_000 };

/** Queues a notice; resolves once Redis holds the job (or already held one with this id). */
export async function enqueueNotice(notices: Queue, notice: Notice): Promise<{ jobId: string }> {
  const jobId = noticeJobId(notice);
  await notices.add(notice.type, notice, {
    jobId,
    removeOnComplete: NOTICE_RETENTION,
    removeOnFail: NOTICE_RETENTION,
  });
  return { jobId };
}
