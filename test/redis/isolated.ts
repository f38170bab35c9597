import { randomBytes } from "node:crypto";
import type { Redis } from "ioredis";
import { connectRedis } from "../../queue/redis.js";

export function testRedisUrl(): string {
  const url = process.env.TEST_REDIS_URL;
  if (!url) throw new Error("TEST_REDIS_URL is not set: run tests through vitest (its global setup sets it)");
  return url;
}

/**
 * One isolated Redis namespace per test: a unique key prefix for our own keys and BullMQ's, and a
 * cleanup that removes every key under it. Tests never share keys, so files can run in parallel.
 */
export interface IsolatedRedis {
  url: string;
  prefix: string;
  client: Redis;
  cleanup(): Promise<void>;
}

export async function isolatedRedis(label = "t"): Promise<IsolatedRedis> {
  const url = testRedisUrl();
  const prefix = `test-${label}-${randomBytes(5).toString("hex")}`;
  const client = connectRedis(url);
  return {
    url,
    prefix,
    client,
    async cleanup() {
      let cursor = "0";
      do {
        const [next, keys] = await client.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000);
        cursor = next;
        if (keys.length) await client.del(...keys);
      } while (cursor !== "0");
      client.disconnect();
    },
  };
}
