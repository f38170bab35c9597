/**
 * A subscriber connection after a reconnect: subscribed again, and a connection closed while that
 * SUBSCRIBE is unanswered (a stop while Redis comes back, or a network that stalls) rejects nothing
 * unhandled. ioredis's own resubscribe leaves that rejection unhandled, which ends a product process:
 * the --mirror soak's process died of it (seed 7121: "Connection is closed." from a command sent in
 * ioredis's ready handler).
 */

import type { Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import { testRedisUrl } from "../test/redis/isolated.js";
import { redisProxy } from "../test/support/redis-proxy.js";
import { until } from "../test/support/wait.js";
import { errorMessage } from "./errors.js";
import { connectRedis, connectSubscriber } from "./redis.js";

const URL = testRedisUrl();
const patience = { timeoutMs: 10_000, everyMs: 20 };

describe("a subscriber connection", () => {
  const opened: Redis[] = [];
  const unhandled: unknown[] = [];
  const onUnhandled = (err: unknown) => unhandled.push(err);
  afterEach(() => {
    process.off("unhandledRejection", onUnhandled);
    for (const c of opened.splice(0)) c.disconnect();
  });

  it("is subscribed again after a reconnect, and closing it during that SUBSCRIBE leaves nothing unhandled", async () => {
    process.on("unhandledRejection", onUnhandled);
    const proxy = await redisProxy(URL);
    const ch = `subscriber-test-${process.pid}-${Date.now()}`;
    const admin = connectRedis(URL);
    opened.push(admin);
    const got: string[] = [];
    const errors: unknown[] = [];
    const { connection: sub, subscribed } = connectSubscriber(proxy.url, ch, {
      onMessage: (m) => got.push(m),
      onError: (e) => errors.push(e),
    });
    opened.push(sub);
    try {
      await subscribed;
      await admin.publish(ch, "before");
      await until(() => got.includes("before"), "the first message", patience);

      // Dropped: ioredis reconnects, and the subscription is made again.
      proxy.dropClients();
      await until(
        async () => (await admin.publish(ch, "after")) > 0 && got.includes("after"),
        "subscribed again",
        patience,
      );

      // Dropped again, and this time the SUBSCRIBE after the reconnect is never answered: closed then.
      proxy.state.holdSubscribe = true;
      proxy.dropClients();
      await until(() => proxy.state.held, "the SUBSCRIBE after the reconnect sent", patience);
      sub.disconnect();
      await until(
        () => errors.length > 0 || unhandled.length > 0,
        "the unanswered SUBSCRIBE rejected",
        patience,
      );
      await new Promise((r) => setTimeout(r, 50));
      expect(unhandled).toEqual([]);
      expect(errors.map(errorMessage)).toEqual(["Connection is closed."]);
    } finally {
      await proxy.close();
    }
  });
});
