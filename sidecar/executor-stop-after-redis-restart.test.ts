/**
 * A graceful sidecar stop right after Redis came back (found by the soak, seed 5213 with 8
 * actions: the Flux sidecar started, Redis down for 0.5 s, then at once a graceful Flux sidecar
 * restart). BullMQ's graceful close of the attempts consumer whose blocking connection is still
 * reconnecting does not resolve; past its bound the host closed it "by force", but BullMQ's
 * close answers a second call with the first call's promise, so the forced close waited on the
 * same hung close and the stop never ended (the process never exited).
 */
import { afterEach, describe, expect, it } from "vitest";
import { silentLogger } from "../queue/log.js";
import { type RestartableRedis, restartableRedis } from "../test/redis/restartable.js";
import { type ExecutorHost, startExecutorHost } from "./executor.js";
import { Following } from "./following.js";
import { memoryReporter } from "./reporter.js";

describe("an executor host stopped right after a Redis restart", () => {
  let redis: RestartableRedis | undefined;
  let host: ExecutorHost | undefined;
  afterEach(async () => {
    host = undefined;
    await redis?.remove();
  });

  it("stops within its bound", { timeout: 60_000 }, async () => {
    redis = await restartableRedis();
    host = startExecutorHost({
      kind: "flux",
      executor: { execute: async () => {} },
      reporter: memoryReporter(),
      following: new Following(() => new Date()),
      log: silentLogger(),
      redisUrl: redis.url,
      prefix: "stop-after-restart",
      stopTimeoutMs: 2_000,
    });
    await redis.stop();
    await redis.start();
    // A hang detector, not a speed target: a stop that works ends within its bounds (2 s each).
    const hung = new Promise<"hung">((r) => setTimeout(() => r("hung"), 20_000).unref());
    expect(await Promise.race([host.stop().then(() => "stopped" as const), hung])).toBe("stopped");
  });
});
