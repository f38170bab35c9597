import { resolveEmbeddedRedis } from "../../queue/redis.js";

/** Gives every test file one Redis URL (TEST_REDIS_URL), starting a private server if none answers. */
export default async function setup() {
  const redis = await resolveEmbeddedRedis();
  process.env.TEST_REDIS_URL = redis.url;
  return async () => {
    await redis.stop();
  };
}
