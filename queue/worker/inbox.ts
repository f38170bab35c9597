/**
 * A branch's inbox in Redis: a stream the gateway appends to (writes, notices, reports) and the
 * owning worker reads in order. A write stays in the stream until a push carrying it lands, so the
 * next owner finds every write not yet published. Every change the worker makes here is fenced:
 * the script does nothing unless the caller still holds the branch's lease.
 */
import type { Redis } from "ioredis";
import { WRITE_OVERHEAD_BYTES } from "../intake.js";
import type { InboxKind } from "../keys.js";
import {
  branchKeys,
  PUBLISHED_TTL_SECONDS,
  publishedChannel,
  REFUSED_PREFIX,
  writePublishedKey,
} from "../keys.js";
import { evalScript, scriptPipeline } from "../redis.js";
import { branchesWithNews, inBatches, type ReadMark } from "./idle.js";
import { fencedWrite } from "./lease.js";

export interface InboxEntry {
  /** Stream entry id: the order of arrival. */
  entryId: string;
  kind: InboxKind;
  data: string;
  /** A write's charge against the intake budget, fixed when the gate accepted it. */
  charge?: number;
}

/** Compares stream ids (`<ms>-<seq>`). */
export function compareEntryIds(a: string, b: string): number {
  const [am, as] = a.split("-").map(Number) as [number, number];
  const [bm, bs] = b.split("-").map(Number) as [number, number];
  return am !== bm ? am - bm : as - bs;
}

/**
 * Lua that sets `charged` (KEYS[3]) to the sum of the charges of the writes still in the inbox
 * (KEYS[2]): the count the gate's charges and the settles' releases keep, rebuilt from the
 * entries when it may be off (an entry already gone, a new owner). Same charge as `writeCharge`.
 */
const RECOUNT_CHARGED = `
local function recountCharged()
  local total, from = 0, '-'
  while true do
    local rows = redis.call('XRANGE', KEYS[2], from, '+', 'COUNT', 1000)
    if #rows == 0 then break end
    for _, row in ipairs(rows) do
      local f, kind, data, charge = row[2], nil, nil, nil
      for i = 1, #f, 2 do
        if f[i] == 'kind' then kind = f[i + 1] elseif f[i] == 'data' then data = f[i + 1]
        elseif f[i] == 'charge' then charge = tonumber(f[i + 1]) end
      end
      -- A write appended before the gate charged costs what the gate would have charged it.
      if charge == nil and kind == 'write' and data ~= nil then charge = string.len(data) + ${WRITE_OVERHEAD_BYTES} end
      total = total + (charge or 0)
    end
    from = '(' .. rows[#rows][1]
  end
  if total > 0 then redis.call('HSET', KEYS[3], 'charged', total) else redis.call('HDEL', KEYS[3], 'charged') end
end
`;

// KEYS: lease, inbox, intake. ARGV: token, ttl seconds, channel, published JSON [[key, id, commit]],
// entries JSON [[entry id, charge]], refused JSON [[key, id, reason]]. Each removed write gives its
// charge back to the intake budget; should an entry be gone already, the count is rebuilt instead.
const settle = fencedWrite(`
${RECOUNT_CHARGED}
local REFUSED_PREFIX = '${REFUSED_PREFIX}'
for _, p in ipairs(cjson.decode(ARGV[4])) do
  redis.call('SET', p[1], p[3], 'EX', ARGV[2])
  redis.call('PUBLISH', ARGV[3], cjson.encode({id = p[2], commit = p[3]}))
end
for _, p in ipairs(cjson.decode(ARGV[6])) do
  redis.call('SET', p[1], REFUSED_PREFIX .. p[3], 'EX', ARGV[2])
  redis.call('PUBLISH', ARGV[3], cjson.encode({id = p[2], refused = p[3]}))
end
local entries = cjson.decode(ARGV[5])
local released, exact = 0, true
for i = 1, #entries, 500 do
  local ids, sum = {}, 0
  for j = i, math.min(i + 499, #entries) do
    ids[#ids + 1] = entries[j][1]
    sum = sum + entries[j][2]
  end
  if redis.call('XDEL', KEYS[2], unpack(ids)) == #ids then released = released + sum else exact = false end
end
if not exact then
  recountCharged()
elseif released > 0 and redis.call('HINCRBY', KEYS[3], 'charged', -released) <= 0 then
  redis.call('HDEL', KEYS[3], 'charged')
end
`);

// KEYS: lease, inbox, intake. ARGV: token, retrying ("1"/"0"), retryAfter seconds, budget bytes,
// recount ("1"/"0"). Tells the gate the budget and whether a publication retry is pending. No
// retry pending means a push landed (or none failed): the pause latch is released. A new owner
// also rebuilds the charged count from the inbox. Returns {fenced, paused, charged}.
const SYNC_INTAKE_LUA = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {0, 0, 0} end
${RECOUNT_CHARGED}
if ARGV[2] == '1' then
  redis.call('HSET', KEYS[3], 'retrying', '1', 'retryAfter', ARGV[3], 'budget', ARGV[4])
else
  redis.call('HSET', KEYS[3], 'budget', ARGV[4])
  redis.call('HDEL', KEYS[3], 'retrying', 'paused', 'retryAfter')
end
if ARGV[5] == '1' then recountCharged() end
local paused = redis.call('HGET', KEYS[3], 'paused') == '1' and 1 or 0
return {1, paused, tonumber(redis.call('HGET', KEYS[3], 'charged') or '0')}
`;

/** An inbox entry to remove, with what the intake gate charged it (0 for a notice). */
export interface SettledEntry {
  entryId: string;
  charge: number;
}

/** What the intake gate holds for a branch. */
export interface IntakeState {
  /** The pause latch is set: the gate refuses every write until a push lands. */
  paused: boolean;
  /** Bytes charged to writes accepted and not yet published or settled as refused. */
  chargedBytes: number;
}

export class LostLeaseError extends Error {
  override name = "LostLeaseError";
}

export class Inbox {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    readonly branchKey: string,
  ) {}

  private get keys() {
    return branchKeys(this.prefix, this.branchKey);
  }

  /** Entries after `afterId` (exclusive; "0" for all), in order. */
  async read(afterId: string, count = 2000): Promise<InboxEntry[]> {
    const start = afterId === "0" ? "-" : `(${afterId}`;
    const rows = (await this.redis.xrange(this.keys.inbox, start, "+", "COUNT", count)) as Array<
      [string, string[]]
    >;
    return rows.map(([entryId, fields]) => {
      const f: Record<string, string> = {};
      for (let i = 0; i + 1 < fields.length; i += 2) f[fields[i] as string] = fields[i + 1] as string;
      const charge = f.charge === undefined ? undefined : Number(f.charge);
      return {
        entryId,
        kind: (f.kind ?? "write") as InboxKind,
        data: f.data ?? "",
        ...(charge !== undefined && Number.isFinite(charge) ? { charge } : {}),
      };
    });
  }

  /**
   * Records that the push carrying these writes landed (published key + message for each), that
   * the refused writes are settled as refused, and removes the settled entries, giving their
   * charges back to the intake budget, in one fenced script. Throws LostLeaseError when not the
   * owner.
   */
  async settle(
    token: string,
    published: Array<{ id: string; commit: string }>,
    entries: SettledEntry[],
    refused: Array<{ id: string; reason: string }> = [],
  ): Promise<void> {
    if (published.length === 0 && entries.length === 0 && refused.length === 0) return;
    const rows = published.map((p) => [writePublishedKey(this.prefix, p.id), p.id, p.commit]);
    const refusedRows = refused.map((r) => [writePublishedKey(this.prefix, r.id), r.id, r.reason]);
    const ok = await settle(
      this.redis,
      this.keys.lease,
      token,
      [this.keys.inbox, this.keys.intake],
      [
        String(PUBLISHED_TTL_SECONDS),
        publishedChannel(this.prefix),
        JSON.stringify(rows),
        JSON.stringify(entries.map((e) => [e.entryId, e.charge])),
        JSON.stringify(refusedRows),
      ],
    );
    if (!ok) throw new LostLeaseError(`lost the lease of ${this.branchKey}`);
  }

  /**
   * Tells the intake gate the branch's budget and whether a publication retry is pending (no
   * retry releases the pause latch), and reads back what the gate holds. `recount` rebuilds the
   * charged count from the inbox (a new owner does, once).
   */
  async syncIntake(
    token: string,
    retry: { pending: boolean; retryAfterSeconds: number; budgetBytes: number; recount?: boolean },
  ): Promise<IntakeState> {
    const [fenced, paused, charged] = (await evalScript(
      this.redis,
      SYNC_INTAKE_LUA,
      3,
      this.keys.lease,
      this.keys.inbox,
      this.keys.intake,
      token,
      retry.pending ? "1" : "0",
      String(Math.max(1, Math.ceil(retry.retryAfterSeconds))),
      String(retry.budgetBytes),
      retry.recount ? "1" : "0",
    )) as [number, number, number];
    if (fenced !== 1) throw new LostLeaseError(`lost the lease of ${this.branchKey}`);
    return { paused: paused === 1, chargedBytes: charged };
  }

  /** Which of these writes a push already carried (their published key exists). */
  async alreadyPublished(ids: string[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    if (ids.length === 0) return out;
    const values = await this.redis.mget(...ids.map((id) => writePublishedKey(this.prefix, id)));
    values.forEach((v, i) => {
      if (v) out.set(ids[i] as string, v);
    });
    return out;
  }
}

// KEYS: inboxes. ARGV: the last entry id each inbox's branch worker read, in the same order ("0":
// none yet). Returns the 1-based positions of the inboxes holding an entry after it. An inbox
// with nothing new answers an empty range, so an idle one costs no entry copied.
const UNREAD_LUA = `
local out = {}
for i, key in ipairs(KEYS) do
  local from = ARGV[i] == '0' and '-' or '(' .. ARGV[i]
  if #redis.call('XRANGE', key, from, '+', 'COUNT', 1) > 0 then out[#out + 1] = i end
end
return out
`;

/** Inboxes asked about in one script call. */
const UNREAD_BATCH = 1000;

/**
 * The branches whose inbox holds an entry after their read mark: one script call per
 * UNREAD_BATCH branches, all sent in one pipeline (one round trip for a replica's branches).
 */
export async function unreadInboxes(redis: Redis, prefix: string, marks: ReadMark[]): Promise<string[]> {
  if (marks.length === 0) return [];
  const batches = inBatches(marks, UNREAD_BATCH);
  const { pipe, script } = scriptPipeline(redis, UNREAD_LUA);
  for (const batch of batches) {
    script(
      batch.length,
      ...batch.map((m) => branchKeys(prefix, m.branchKey).inbox),
      ...batch.map((m) => m.readTo),
    );
  }
  const replies = (await pipe.exec()) ?? [];
  const positions = batches.map((_, b) => {
    const [err, value] = replies[b] ?? [null, []];
    if (err) throw err;
    return (value as number[]) ?? [];
  });
  return branchesWithNews(batches, positions);
}
