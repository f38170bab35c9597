/**
 * One terminal report per operation, through startSidecar (executor host, claim reconciler and the
 * Flux kind) over real Redis and fluxsim. The case: a reconciler pass reads the claim while the
 * operation is Settling, the executor completes it and stops following it before that pass gets
 * to the in-flight check, and the pass then offers the operation — as it read it — to restart
 * recovery. Recovery must not follow an operation this process already ended.
 */
import { expect, it } from "vitest";
import { fluxSpecField } from "../../queue/kube/index.js";
import type { ApplierDeps, ApplierKindModule, ReportFn } from "../../sidecar/applier-kind.js";
import { createApplierKind, type FluxKindOptions } from "../../sidecar/flux/index.js";
import { isInFlight, operationOf } from "../../sidecar/operation-record.js";
import { fileWorld } from "../support/file-world.js";
import { scene, startWorld, until } from "./harness.js";

const world = fileWorld(() => startWorld());

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
  const sidecar = await world.startFluxSidecar({ resyncMs: 200, kindModule });
  try {
    await s.inControl();
    const commit = await s.pushConfig("once");
    await world.queues.send(s.attempt(commit, { token }));
    await world.queues.reported(token, "Succeeded");
    await within(() => passWaited, "the pass that read the Settling operation to go on");
    // That pass and the next have run, and nothing here follows the operation any more.
    const after = sidecar.reconciler.passCount() + 2;
    await within(() => sidecar.reconciler.passCount() >= after, "two more passes");
    await within(() => sidecar.executor.running().length === 0, "nothing followed");

    expect(await world.queues.phases(token)).toEqual(["Requested", "Running", "Settling", "Succeeded"]);
    expect(await s.configValue()).toBe("once");
    expect(fluxSpecField(await s.readKs(), "suspend")).toBe(true);
  } finally {
    await sidecar.stop();
  }
});
