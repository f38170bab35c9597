import { describe, expect, it } from "vitest";
import { freePort, RedisUnavailableError, redisAnswers, resolveEmbeddedRedis } from "../../queue/redis.js";

describe("the embedded-default Redis rule", () => {
  it("uses REDIS_URL when it is set", async () => {
    const r = await resolveEmbeddedRedis({ REDIS_URL: "redis://example:6390" });
    expect(r).toMatchObject({ url: "redis://example:6390", origin: "REDIS_URL" });
  });

  it("uses the local Redis when one answers", async () => {
    const url = new URL(process.env.TEST_REDIS_URL!);
    const r = await resolveEmbeddedRedis({}, { localPort: Number(url.port) });
    expect(r).toMatchObject({ url: `redis://127.0.0.1:${url.port}`, origin: "local" });
  });

  it("starts a private redis-server when none answers, and stops it", async () => {
    const unused = await freePort();
    const r = await resolveEmbeddedRedis({}, { localPort: unused });
    expect(r.origin).toBe("private");
    const port = Number(new URL(r.url).port);
    expect(await redisAnswers("127.0.0.1", port)).toBe(true);
    await r.stop();
    expect(await redisAnswers("127.0.0.1", port)).toBe(false);
  });

  it("says how to get Redis when there is no redis-server", async () => {
    const unused = await freePort();
    await expect(
      resolveEmbeddedRedis({}, { localPort: unused, redisServer: "no-such-redis-server" }),
    ).rejects.toThrow(RedisUnavailableError);
    await expect(
      resolveEmbeddedRedis({}, { localPort: unused, redisServer: "no-such-redis-server" }),
    ).rejects.toThrow(/REDIS_URL.*redis-server/);
  });
});
