/**
 * A branch's inbox in Redis: a stream the gateway appends to (writes, notices, reports) and the
 * owning worker reads in order. A write stays in the stream until a push carrying it lands, so the
 * next owner finds every write not yet published. Every change the worker makes here is fenced:
 * the script does nothing unless the caller still holds the branch's lease.
 */
import type { Redis } from "ioredis";
import type { InboxKind } from "../keys.js";
import { branchKeys, PUBLISHED_TTL_SECONDS, publishedChannel, writePublishedKey } from "../keys.js";
import { fencedWrite } from "./lease.js";

/**
 * A refused write's published key holds this prefix and the reason instead of a commit, so a
 * later owner skips it and a waiting intake call learns the outcome.
 */
export const REFUSED_PREFIX = "refused: ";

export interface InboxEntry {
  /** Stream entry id: the order of arrival. */
  entryId: string;
  kind: InboxKind;
  data: string;
}

/** Compares stream ids (`<ms>-<seq>`). */
export function compareEntryIds(a: string, b: string): number {
  const [am, as] = a.split("-").map(Number) as [number, number];
  const [bm, bs] = b.split("-").map(Number) as [number, number];
  return am !== bm ? am - bm : as - bs;
}

// KEYS: lease, inbox. ARGV: token, ttl seconds, channel, published JSON [[key, id, commit]], entry ids JSON,
// refused JSON [[key, id, reason]].
const settle = fencedWrite(`
local REFUSED_PREFIX = '${REFUSED_PREFIX}'
for _, p in ipairs(cjson.decode(ARGV[4])) do
  redis.call('SET', p[1], p[3], 'EX', ARGV[2])
  redis.call('PUBLISH', ARGV[3], cjson.encode({id = p[2], commit = p[3]}))
end
for _, p in ipairs(cjson.decode(ARGV[6])) do
  redis.call('SET', p[1], REFUSED_PREFIX .. p[3], 'EX', ARGV[2])
  redis.call('PUBLISH', ARGV[3], cjson.encode({id = p[2], refused = p[3]}))
end
local ids = cjson.decode(ARGV[5])
for i = 1, #ids, 500 do
  redis.call('XDEL', KEYS[2], unpack(ids, i, math.min(i + 499, #ids)))
end
`);

// KEYS: lease, intake. ARGV: token, paused ("1"/"0"), retryAfter seconds.
const setIntake = fencedWrite(`
if ARGV[2] == '1' then
  redis.call('HSET', KEYS[2], 'paused', '1', 'retryAfter', ARGV[3])
else
  redis.call('HDEL', KEYS[2], 'paused', 'retryAfter')
end
`);

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
      return { entryId, kind: (f.kind ?? "write") as InboxKind, data: f.data ?? "" };
    });
  }

  /**
   * Records that the push carrying these writes landed (published key + message for each), that
   * the refused writes are settled as refused, and removes the settled entries, in one fenced
   * script. Throws LostLeaseError when not the owner.
   */
  async settle(
    token: string,
    published: Array<{ id: string; commit: string }>,
    entryIds: string[],
    refused: Array<{ id: string; reason: string }> = [],
  ): Promise<void> {
    if (published.length === 0 && entryIds.length === 0 && refused.length === 0) return;
    const rows = published.map((p) => [writePublishedKey(this.prefix, p.id), p.id, p.commit]);
    const refusedRows = refused.map((r) => [writePublishedKey(this.prefix, r.id), r.id, r.reason]);
    const ok = await settle(
      this.redis,
      this.keys.lease,
      token,
      [this.keys.inbox],
      [
        String(PUBLISHED_TTL_SECONDS),
        publishedChannel(this.prefix),
        JSON.stringify(rows),
        JSON.stringify(entryIds),
        JSON.stringify(refusedRows),
      ],
    );
    if (!ok) throw new LostLeaseError(`lost the lease of ${this.branchKey}`);
  }

  /** Pauses or resumes the gateway's intake of writes for this branch. */
  async setIntake(token: string, paused: boolean, retryAfterSeconds: number): Promise<void> {
    const ok = await setIntake(
      this.redis,
      this.keys.lease,
      token,
      [this.keys.intake],
      [paused ? "1" : "0", String(Math.max(1, Math.ceil(retryAfterSeconds)))],
    );
    if (!ok) throw new LostLeaseError(`lost the lease of ${this.branchKey}`);
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
