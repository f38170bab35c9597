import { createServer } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { connectRedis } from "../../queue/redis.js";
import { type RestartableRedis, restartableRedis } from "./restartable.js";

const portOf = (url: string) => Number(new URL(url).port);
/** Whether another server on the machine could take the port now. */
const bindable = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = createServer();
    s.once("error", () => resolve(false));
    s.listen(port, "127.0.0.1", () => s.close(() => resolve(true)));
  });

describe("a restartable Redis", () => {
  let redis: RestartableRedis | undefined;
  afterEach(async () => {
    await redis?.remove();
    redis = undefined;
  });

  it("holds its port while the server is down, so no other server can answer in its place", async () => {
    redis = await restartableRedis({ persist: false });
    const port = portOf(redis.url);
    const c = connectRedis(redis.url);
    await c.set("k", "v");
    await redis.stop("SIGKILL");
    expect(await bindable(port)).toBe(false);
    await redis.start();
    // Without persistence the new server starts empty; the client comes back on its own.
    expect(await c.get("k")).toBeNull();
    c.disconnect();
  });

  it("keeps what it acknowledged across a graceful restart by default", async () => {
    redis = await restartableRedis();
    const c = connectRedis(redis.url);
    await c.set("k", "v");
    await redis.stop();
    await redis.start();
    expect(await c.get("k")).toBe("v");
    c.disconnect();
  });
});
