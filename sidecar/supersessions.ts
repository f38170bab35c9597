/**
 * Operations the branch worker found superseded by a newer tip (`SupersededNotice`), as the
 * sidecar learns of them: announced on a pub/sub channel (the follower wakes at once) and kept
 * in a key with a TTL (a follower that starts later — a restart's recovery — or missed the
 * message reads it). A notice is the worker's decision, not proof: the executor proves it again,
 * against the tip the worker records then, before it ends anything.
 */
import type { Redis } from "ioredis";
import type { SupersededNotice } from "../queue/contract.js";
import { errorMessage } from "../queue/errors.js";
import { supersededChannel } from "../queue/keys.js";
import type { Logger } from "../queue/log.js";
import { parseSuperseded, readSuperseded, readTip } from "../queue/records.js";
import { connectSubscriber } from "../queue/redis.js";

/** What an executor reads of supersession: the notice kept for an operation, and the tip now. */
export interface SupersessionSource {
  /** The notice kept for operation `token`, if the worker found it superseded. */
  read(token: string): Promise<SupersededNotice | undefined>;
  /** The tip the branch worker records now (what a notice is proven against again). */
  tip(branchKey: string): Promise<string | undefined>;
}

export function redisSupersessions(redis: Redis, prefix: string): SupersessionSource {
  return {
    read: (token) => readSuperseded(redis, prefix, token),
    // The tip the branch worker records (`queue/worker/tip-record.ts` writes it, fenced).
    tip: (branchKey) => readTip(redis, prefix, branchKey),
  };
}

/**
 * Subscribes to the notices on a connection of its own (a subscribed connection serves nothing
 * else); each valid one is handed to `onNotice`. Returns the function that closes it.
 */
export function subscribeSupersessions(o: {
  redisUrl: string;
  prefix: string;
  log: Logger;
  onNotice(notice: SupersededNotice): void;
}): () => Promise<void> {
  const couldNot = (err: unknown) =>
    o.log.warn({ err: errorMessage(err) }, "could not subscribe to supersession notices");
  const { connection: sub, subscribed } = connectSubscriber(o.redisUrl, supersededChannel(o.prefix), {
    onMessage: (message) => {
      const notice = parseSuperseded(message);
      if (!notice) return void o.log.warn("an invalid supersession notice was ignored");
      o.onNotice(notice);
    },
    onError: couldNot,
  });
  // Not awaited: a Redis away at the start is subscribed once it answers (again after every
  // reconnect), and a follower reads the kept notice on its safety-net wakes meanwhile.
  subscribed.catch(couldNot);
  return async () => {
    await sub.quit().catch(() => sub.disconnect());
  };
}
