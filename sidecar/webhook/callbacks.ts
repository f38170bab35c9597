/**
 * The sidecar's side of callbacks in Redis: an operation is opened for reports before its request
 * is sent (so a tool that reports before it answers is not missed), its reports are drained in
 * the order the gateway appended them, and it is closed once its end is recorded on the claim:
 * from then on a report for its token is a miss.
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
  /** The reports appended since the last take, oldest first; a malformed entry is skipped. */
  take(token: string): Promise<CallbackReport[]>;
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
    async take(token) {
      const raw = (await redis.lpop(callbackKeys(prefix, token).reports, 100)) ?? [];
      return raw.flatMap((s) => {
        try {
          const r = CallbackReport.safeParse(JSON.parse(s));
          return r.success ? [r.data] : [];
        } catch {
          return [];
        }
      });
    },
    async close(token) {
      const k = callbackKeys(prefix, token);
      await redis.del(k.record, k.reports);
    },
  };
}
