/**
 * The sidecar's side of callbacks in Redis: an operation is opened for reports before its request
 * is sent (so a tool that reports before it answers is not missed), its reports are read in
 * the order the gateway appended them and dropped only once what they say is on the claim (a
 * process stopped or killed in between leaves them for restart recovery to read again), and it
 * is closed once its end is recorded on the claim: from then on a report for its token is a miss.
 */
import type { Redis } from "ioredis";
import {
  CALLBACK_RECORD_TTL_SECONDS,
  type CallbackRecord,
  CallbackReport,
  callbackKeys,
} from "../../queue/webhook-callback.js";

export interface CallbackStore {
  open(token: string, record: CallbackRecord): Promise<void>;
  /**
   * The reports not dropped yet, oldest first (at most 100), and how many entries the read spans:
   * a malformed entry is skipped but counted, so dropping them all drops it too.
   */
  read(token: string): Promise<{ reports: CallbackReport[]; entries: number }>;
  /** Drops the oldest `entries` entries (those read); a report appended since stays. */
  drop(token: string, entries: number): Promise<void>;
  close(token: string): Promise<void>;
}

export function redisCallbacks(redis: Redis, prefix: string): CallbackStore {
  return {
    async open(token, record) {
      await redis.set(
        callbackKeys(prefix, token).record,
        JSON.stringify(record),
        "EX",
        CALLBACK_RECORD_TTL_SECONDS,
      );
    },
    async read(token) {
      const raw = await redis.lrange(callbackKeys(prefix, token).reports, 0, 99);
      const reports = raw.flatMap((s) => {
        try {
          const r = CallbackReport.safeParse(JSON.parse(s));
          return r.success ? [r.data] : [];
        } catch {
          return [];
        }
      });
      return { reports, entries: raw.length };
    },
    async drop(token, entries) {
      if (entries > 0) await redis.ltrim(callbackKeys(prefix, token).reports, entries, -1);
    },
    async close(token) {
      const k = callbackKeys(prefix, token);
      await redis.del(k.record, k.reports);
    },
  };
}
