import { resolveEmbeddedRedis } from "../../queue/redis.js";
import { ensureRedisServer } from "./install.js";

/** Gives every test file one Redis URL (TEST_REDIS_URL), starting a private server if none answers. */
export default async function setup() {
  const redis = await resolveEmbeddedRedis(process.env, { ensureServer: ensureRedisServer });
  process.env.TEST_REDIS_URL = redis.url;
  return async () => {
    await redis.stop();
  };
}
