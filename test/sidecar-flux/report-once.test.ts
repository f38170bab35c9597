/**
 * One terminal report per operation, through startSidecar (executor host, claim reconciler and the
 * Flux kind) over real Redis and fluxsim. The case: a reconciler pass reads the claim while the
 * operation is Settling, the executor completes it and stops following it before that pass gets
 * to the in-flight check, and the pass then offers the operation — as it read it — to restart
 * recovery. Recovery must not follow an operation this process already ended.
 */
import { Queue } from "bullmq";
import { afterAll, beforeAll, expect, it } from "vitest";
import { attemptsQueue, QUEUES, type Report } from "../../queue/contract.js";
import { API_VERSION } from "../../queue/crds/index.js";
import { silentLogger } from "../../queue/log.js";
import type { ApplierDeps, ApplierKindModule, ReportFn } from "../../sidecar/applier-kind.js";
import { isConditionTrue } from "../../sidecar/claims/conditions.js";
import { createApplierKind, type FluxKindOptions } from "../../sidecar/flux/index.js";
import { type Sidecar, startSidecar } from "../../sidecar/main.js";
import { isInFlight, operationOf } from "../../sidecar/operation-record.js";
import { type IsolatedRedis, isolatedRedis } from "../redis/isolated.js";
import { configMap, scene, startWorld, until, type World } from "./harness.js";

let world: World;
let redis: IsolatedRedis;
beforeAll(async () => {
  world = await startWorld();
  redis = await isolatedRedis("flux-once");
});
afterAll(async () => {
  await world?.stop();
  await redis?.cleanup();
});

/** Resolves when `probe` holds, polling; rejects after `ms`. */
const within = (probe: () => boolean, what: string, ms = 15_000) =>
  until(async () => probe() || undefined, what, ms);

it("a pass that read the operation before the executor completed it does not report it again", async () => {
  const s = await scene(world);
  const token = `op-once-${Date.now()}`;
  // The interleaving, made deterministic: the executor's Settling report waits until a reconciler
  // pass has read the claim showing this operation Settling; that pass then waits (in
  // checkExternal, between its read and its in-flight check) until the executor stopped following.
  let passSawSettling = false;
  let passWaited = false;
  const kindModule: ApplierKindModule<FluxKindOptions> = {
    createApplierKind(deps: ApplierDeps<FluxKindOptions>) {
      const parts = createApplierKind(deps);
      const executor = parts.executor;
      const controller = parts.controller;
      return {
        ...parts,
        executor: {
          execute: (attempt, report, signal) => {
            const held: ReportFn = async (phase, extra) => {
              if (phase === "Settling" && attempt.token === token) {
                await within(() => passSawSettling, "a pass reading the Settling operation");
              }
              return report(phase, extra);
            };
            return executor.execute(attempt, held, signal);
          },
          recover: (r, report, signal) => executor.recover!(r, report, signal),
          shutdown: () => executor.shutdown!(),
        },
        controller: new Proxy(controller, {
          get(target, prop) {
            if (prop === "checkExternal") {
              return async (...args: Parameters<typeof controller.checkExternal>) => {
                const op = operationOf(args[0]);
                if (!passWaited && isInFlight(op) && op.token === token && op.phase === "Settling") {
                  passSawSettling = true;
                  await within(() => !deps.following.isFollowed(token), "the executor to end");
                  passWaited = true;
                }
                return controller.checkExternal(...args);
              };
            }
            const v = Reflect.get(target, prop, target);
            return typeof v === "function" ? v.bind(target) : v;
          },
        }),
      };
    },
  };
  await world.api.applyYaml(`
apiVersion: ${API_VERSION}
kind: GitProvider
metadata: {name: repo, namespace: ${s.ns}}
spec: {url: "${s.url}", type: gitea, webhookSecretRef: {name: hook}}
---
apiVersion: ${API_VERSION}
kind: GitTarget
metadata: {name: apps, namespace: ${s.ns}}
spec: {providerRef: {name: repo}, branch: main, path: apps, claimRef: {kind: FluxClaim, name: claim}}
`);
  const sidecar: Sidecar = await startSidecar({
    applier: "flux",
    kubeConfig: world.api.kubeConfig(),
    redisUrl: redis.url,
    redisPrefix: redis.prefix,
    log: silentLogger(),
    resyncMs: 200,
    kindModule,
    options: { pollMs: 50, shortRequeueMs: 20, windowGraceMs: 200 },
  });
  const attempts = new Queue(attemptsQueue("flux"), { connection: { url: redis.url }, prefix: redis.prefix });
  const reports = new Queue(QUEUES.reports, { connection: { url: redis.url }, prefix: redis.prefix });
  try {
    await until(async () => {
      const c = await s.readClaim();
      return isConditionTrue((c.status as { conditions?: never[] })?.conditions, "InControl");
    }, "the claim in control");
    const commit = await s.push({ "apps/cm.yaml": configMap("app-config", "once") });
    await attempts.add("attempt", s.attempt(commit, { token }), { jobId: token, attempts: 1 });

    const phasesOf = async () =>
      (await reports.getJobs(["waiting", "active", "completed", "delayed"]))
        .sort((a, b) => Number(a.id) - Number(b.id))
        .map((j) => j.data as Report)
        .filter((r) => r.type === "phase" && r.token === token)
        .map((r) => (r.type === "phase" ? r.phase : ""));
    await until(async () => (await phasesOf()).includes("Succeeded"), "the Succeeded report");
    await within(() => passWaited, "the pass that read the Settling operation to go on");
    // That pass and the next have run, and nothing here follows the operation any more.
    const after = sidecar.reconciler.passCount() + 2;
    await within(() => sidecar.reconciler.passCount() >= after, "two more passes");
    await within(() => sidecar.executor.running().length === 0, "nothing followed");

    expect(await phasesOf()).toEqual(["Requested", "Running", "Settling", "Succeeded"]);
    expect(await s.configValue()).toBe("once");
    expect((await s.readKs()).spec?.suspend).toBe(true);
  } finally {
    await attempts.close();
    await reports.close();
    await sidecar.stop();
  }
});
