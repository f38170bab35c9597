/**
 * A private `redis-server` a test can stop and start again on the same port. It keeps an
 * append-only file in its own folder, as a production Redis does (see manifests/), so a restart
 * keeps what it acknowledged.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, redisAnswers } from "../../queue/redis.js";
import { until } from "../support/wait.js";

export interface RestartableRedis {
  url: string;
  /** SIGTERM: Redis flushes its append-only file and exits, as on a pod's graceful stop. */
  stop(): Promise<void>;
  /** Starts it again on the same port and folder; resolves once it answers. */
  start(): Promise<void>;
  /** Stops it and removes its folder. */
  remove(): Promise<void>;
}

export async function restartableRedis(): Promise<RestartableRedis> {
  const dir = await mkdtemp(join(tmpdir(), "applygate-redis-"));
  const port = await freePort();
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn(
      "redis-server",
      ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes", "--dir", dir],
      { stdio: "ignore" },
    );
    await until(async () => redisAnswers("127.0.0.1", port, 200), "redis-server to answer", {
      timeoutMs: 10_000,
      everyMs: 50,
      retryErrors: true,
    });
  };
  const stop = () => {
    const c = child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return Promise.resolve();
    return new Promise<void>((resolve) => {
      c.once("exit", () => resolve());
      c.kill("SIGTERM");
    });
  };
  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    stop,
    start,
    async remove() {
      await stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
