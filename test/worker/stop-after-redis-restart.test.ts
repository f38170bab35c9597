/**
 * A graceful stop of a worker replica right after Redis came back (found by the soak, seed 2376
 * with 8 actions: a Redis restart followed at once by a worker restart). BullMQ's graceful close
 * of a consumer whose blocking connection is still reconnecting waits forever; the replica's stop
 * hung with it, so the branch worker kept running and the lease was never given back. The stop
 * now gives the consumers a bound, then goes on.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { silentLogger } from "../../queue/log.js";
import { Replica } from "../../queue/worker/replica.js";
import { type RestartableRedis, restartableRedis } from "../redis/restartable.js";

describe("a replica stopped right after a Redis restart", () => {
  let redis: RestartableRedis | undefined;
  let dir = "";
  afterEach(async () => {
    await redis?.remove();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("stops", { timeout: 60_000 }, async () => {
    redis = await restartableRedis();
    dir = await mkdtemp(join(tmpdir(), "applygate-replica-"));
    const replica = new Replica({
      redisUrl: redis.url,
      prefix: "stop-after-restart",
      cacheDir: dir,
      directory: { branch: async () => undefined },
      log: silentLogger(),
    });
    await replica.start();
    await redis.stop();
    await redis.start();
    // A hang detector, not a speed target: a stop that works ends long before this.
    const hung = new Promise<"hung">((r) => setTimeout(() => r("hung"), 30_000).unref());
    expect(await Promise.race([replica.stop().then(() => "stopped" as const), hung])).toBe("stopped");
  });
});
