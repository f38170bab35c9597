/**
 * Redis restarted mid-flight. The whole assembly runs on a private `redis-server` of its own
 * (own port), started with `--appendonly yes` in a folder of its own: a production Redis keeps
 * an append-only file (see manifests/), so a restart keeps what it acknowledged, and without it
 * queued writes would simply vanish. While Redis is down the gateway answers 503; once it is back
 * on the same port every component reconnects, and an edit accepted just before the stop and one
 * accepted after the restart both end in Git (one commit each) and on the cluster.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writePublishedKey } from "../../queue/keys.js";
import { connectRedis } from "../../queue/redis.js";
import {
  apiEdit,
  clusterValue,
  foreignPush,
  gitValue,
  holds,
  readClaim,
  until,
} from "../playground/actors.js";
import { type RestartableRedis, restartableRedis } from "../redis/restartable.js";
import { type Scene, startScene, unique } from "./harness.js";

describe("Redis restarted", () => {
  let s: Scene | undefined;
  let redis: RestartableRedis | undefined;
  beforeAll(async () => {
    redis = await restartableRedis();
    s = await startScene({ redisUrl: redis.url });
  });
  afterAll(async () => {
    await s?.stop();
    await redis?.remove();
  });

  it("loses nothing it acknowledged, answers 503 while down, and everything reconnects", {
    timeout: 120_000,
  }, async () => {
    const scene = s as Scene;
    const a = scene.a;
    const before = `before-${unique()}`;
    const after = `after-${unique()}`;

    // Accepted (202), then Redis goes away before anybody could publish it, perhaps.
    const first = await apiEdit(a, "flux", before, { wait: false });
    expect(first.status).toBe(202);
    await redis?.stop();

    const down = await apiEdit(a, "argocd", after, { wait: false });
    expect(down.status).toBe(503);

    await redis?.start();
    // The gateway takes writes again once its connection is back.
    const second = await until(
      async () => {
        const r = await apiEdit(a, "argocd", after, { wait: false });
        return r.status === 202 ? r : undefined;
      },
      "the gateway to accept writes again",
      60_000,
      250,
    );

    const client = connectRedis(a.redis.url);
    try {
      for (const id of [first.body.id, second.body.id] as string[]) {
        await until(
          async () => (await client.get(writePublishedKey(a.prefix, id))) ?? undefined,
          `write ${id} to publish`,
          60_000,
        );
      }
    } finally {
      client.disconnect();
    }
    // The webhook, the worker and both sidecars are back: a push after the restart is applied by
    // both appliers (its content is unchanged, so the values stay).
    const pushed = await foreignPush(a, "flux", before);
    for (const app of ["flux", "argocd"] as const) {
      await until(
        async () => {
          const c = await readClaim(a, app);
          const op = c?.status?.operation as { phase?: string; commit?: string } | undefined;
          return op?.phase === "Succeeded" && (await holds(a, op.commit, pushed));
        },
        `${app} to apply the push made after the restart`,
        60_000,
      );
    }
    expect(await gitValue(a, "flux")).toBe(before);
    expect(await gitValue(a, "argocd")).toBe(after);
    expect((await clusterValue(a, "flux")).greeting).toBe(before);
    expect((await clusterValue(a, "argocd")).greeting).toBe(after);
  });
});
