/**
 * Every connection BullMQ opens for us reconnects at our pace (at most 2 s between attempts), not
 * at BullMQ's own (20 s after ten tries): after a failover the consumers must come back when the
 * gateway does.
 */
import { Worker } from "bullmq";
import { afterEach, describe, expect, it } from "vitest";
import { testRedisUrl } from "../test/redis/isolated.js";
import { bullConnection, connectRedis, reconnectDelay } from "./redis.js";

const URL = testRedisUrl();
const attempts = Array.from({ length: 100 }, (_, i) => i + 1);

describe("reconnect pace", () => {
  let worker: Worker | undefined;
  afterEach(async () => {
    await worker?.close(true);
    worker = undefined;
  });

  it("waits longer each attempt and never more than 2 s", () => {
    const delays = attempts.map(reconnectDelay);
    for (let i = 1; i < delays.length; i++) expect(delays[i]).toBeGreaterThanOrEqual(delays[i - 1] as number);
    expect(Math.max(...delays)).toBe(2000);
    expect(delays[0]).toBeGreaterThan(0);
  });

  it("is the pace of a BullMQ consumer's connections, the blocking one included", async () => {
    worker = new Worker(`reconnect-${process.pid}-${Date.now()}`, async () => {}, {
      connection: bullConnection(URL),
      prefix: `reconnect-${process.pid}`,
    });
    await worker.waitUntilReady();
    // The options BullMQ hands ioredis for its connections, the blocking one (the one a failover
    // must not park) included.
    type Options = { opts: { retryStrategy: (n: number) => number } };
    const backend = (worker as unknown as { backend: { connection: Options; blockingConnection: Options } })
      .backend;
    for (const c of [backend.connection, backend.blockingConnection])
      expect(Math.max(...attempts.map(c.opts.retryStrategy))).toBeLessThanOrEqual(2000);
  });

  it("is the pace of a sentinel setting's connections too", () => {
    const options = bullConnection("redis+sentinel://127.0.0.1:26379/primary") as {
      retryStrategy: (n: number) => number;
    };
    expect(Math.max(...attempts.map(options.retryStrategy))).toBeLessThanOrEqual(2000);
  });

  it("is the pace of our own connections", () => {
    const c = connectRedis(URL);
    try {
      const strategy = c.options.retryStrategy as (n: number) => number;
      expect(Math.max(...attempts.map(strategy))).toBeLessThanOrEqual(2000);
    } finally {
      c.disconnect();
    }
  });
});
