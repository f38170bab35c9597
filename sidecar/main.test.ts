import { describe, expect, it } from "vitest";
import { loadConfig } from "../queue/config.js";
import { hostAttempt } from "../test/support/executor-host.js";
import { fileWorld } from "../test/support/file-world.js";
import { startSidecarWorld } from "../test/support/sidecar-world.js";
import { until } from "../test/support/wait.js";
import type { ApplierKindModule } from "./applier-kind.js";
import { ApplierNotAvailable, loadApplierKind, sidecarSettings } from "./main.js";

const world = fileWorld(() => startSidecarWorld({ label: "sidecar" }));

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
    const sidecar = await world.startSidecar({ applier: "flux", kindModule: kind });
    await world.queues.send(hostAttempt("t1"));
    await until(() => log.includes("execute:t1:flux"), "the attempt executed", {
      timeoutMs: 5000,
      everyMs: 10,
    });
    await sidecar.stop();
    expect(log).toEqual(["execute:t1:flux", "shutdown", "observer stopped"]);
  });
});
