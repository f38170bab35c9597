import { Queue } from "bullmq";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../queue/config.js";
import { type Attempt, attemptsQueue } from "../queue/contract.js";
import { crdFiles } from "../queue/crds/files.js";
import { silentLogger } from "../queue/log.js";
import { type ApiServer, startApiServer } from "../test/cluster/apiserver/index.js";
import { isolatedRedis } from "../test/redis/isolated.js";
import { until } from "../test/support/wait.js";
import type { ApplierKindModule } from "./applier-kind.js";
import { ApplierNotAvailable, loadApplierKind, sidecarSettings, startSidecar } from "./main.js";

let server: ApiServer;
beforeAll(async () => {
  server = await startApiServer();
  for (const f of crdFiles()) await server.installCrdFile(f);
});
afterAll(async () => server?.close());

describe("sidecar wiring", () => {
  it("the webhook address guard: internal addresses refused and private ones allowed unless a flag or the environment says otherwise", () => {
    const guard = (argv: string[], env: Record<string, string> = {}) => {
      const { config } = loadConfig(sidecarSettings, ["--applier", "webhook", ...argv], env);
      return { allowInternal: config.webhookAllowInternal, refusePrivate: config.webhookRefusePrivate };
    };
    expect(guard([])).toEqual({ allowInternal: false, refusePrivate: false });
    expect(guard(["--webhook-refuse-private"])).toEqual({ allowInternal: false, refusePrivate: true });
    expect(guard([], { APPLYGATE_WEBHOOK_REFUSE_PRIVATE: "true" })).toEqual({
      allowInternal: false,
      refusePrivate: true,
    });
    expect(guard(["--webhook-allow-internal"])).toEqual({ allowInternal: true, refusePrivate: false });
  });

  it("a kind module that does not exist fails with one clear line", async () => {
    const err = await loadApplierKind("nope" as "flux").catch((e) => e);
    expect(err).toBeInstanceOf(ApplierNotAvailable);
    expect(err.message).toBe(
      "the nope applier is not available: sidecar/nope/index.ts does not exist in this build",
    );
  });

  it("startSidecar runs attempts through the kind's executor and stops gracefully (shutdown hook)", async () => {
    const redis = await isolatedRedis("sidecar");
    const log: string[] = [];
    const kind: ApplierKindModule = {
      createApplierKind: (deps) => ({
        executor: {
          async execute(a, report) {
            log.push(`execute:${a.token}:${deps.kind}`);
            await report("Succeeded");
          },
          async shutdown() {
            log.push("shutdown");
          },
        },
        controller: {
          applierOf: () => ({ namespace: "flux-system", name: "web" }),
          source: async () => ({ state: "Unknown", message: "none" }),
          checkExternal: async () => ({ configured: true }),
          hold: async () => ({ conditions: [] }),
          handBack: async () => ({ done: true }),
        },
        windowObserver: {
          async stop() {
            log.push("observer stopped");
          },
        },
      }),
    };
    const sidecar = await startSidecar({
      applier: "flux",
      kubeConfig: server.kubeConfig(),
      redisUrl: redis.url,
      redisPrefix: redis.prefix,
      log: silentLogger(),
      kindModule: kind,
    });
    const q = new Queue(attemptsQueue("flux"), { connection: { url: redis.url }, prefix: redis.prefix });
    const attempt: Attempt = {
      token: "t1",
      claim: { kind: "FluxClaim", namespace: "apps", name: "web" },
      applier: { kind: "flux", namespace: "flux-system", name: "web" },
      branchKey: "git.example/org/repo@main",
      repository: "https://git.example/org/repo",
      branch: "main",
      commit: "f".repeat(40),
      targets: [{ uid: "u", namespace: "apps", name: "t", reason: "CatchUp" }],
      sentAt: new Date().toISOString(),
    };
    await q.add("attempt", attempt, { attempts: 1 });
    await until(() => log.includes("execute:t1:flux"), "the attempt executed", {
      timeoutMs: 5000,
      everyMs: 10,
    });
    await sidecar.stop();
    expect(log).toEqual(["execute:t1:flux", "shutdown", "observer stopped"]);
    await q.close();
    await redis.cleanup();
  });
});
