/**
 * The Flux applier kind: what `applygate sidecar --applier flux` plugs into the shared sidecar.
 * Options (all optional, milliseconds): pollMs, unresolvedAfterMs, unresolvedMaxIntervalMs,
 * sourceTimeoutMs, shortRequeueMs, resyncMs, releaseGiveUpMs, windowGraceMs; isCurrent, a
 * function (attempt) => Promise<boolean> telling whether the attempt's commit is still the tip;
 * and freshness, a FreshnessCheck asked just before the resume (the tip and the edit recheck).
 */
import type { Attempt, ClaimRef } from "../../queue/contract.js";
import type { ApplierDeps, ReportFn } from "../applier-kind.js";
import type { FreshnessCheck } from "../tip-check.js";
import { FluxClient } from "./client.js";
import { FluxClaimController } from "./controller.js";
import { FluxExecutor, type FluxTimings } from "./executor.js";
import { FluxWindowObserver } from "./observer.js";

export { FluxClient } from "./client.js";
export { FluxClaimController } from "./controller.js";
export { FluxExecutor } from "./executor.js";
export { FluxWindowObserver } from "./observer.js";
export { readOutcome } from "./outcome.js";
export { checkSuspendOwnership } from "./suspend-owner.js";

const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : undefined);

export function createApplierKind(deps: ApplierDeps) {
  const o = deps.options;
  const log = deps.log.child({ applier: "flux" });
  const client = new FluxClient(deps.kube, { log, ...(num(o.pollMs) ? { pollMs: num(o.pollMs) } : {}) });
  const windowObserver = new FluxWindowObserver({
    kube: deps.kube,
    reporter: deps.reporter,
    log,
    now: deps.now,
    ...(num(o.windowGraceMs) !== undefined ? { graceMs: num(o.windowGraceMs) } : {}),
  });
  const timings: Partial<FluxTimings> = {};
  for (const k of ["unresolvedAfterMs", "unresolvedMaxIntervalMs", "sourceTimeoutMs"] as const) {
    const v = num(o[k]);
    if (v !== undefined) timings[k] = v;
  }
  const executor = new FluxExecutor({
    client,
    log,
    events: deps.events,
    now: deps.now,
    timings,
    window: windowObserver,
    ...(typeof o.isCurrent === "function"
      ? { isCurrent: o.isCurrent as (a: Attempt) => Promise<boolean> }
      : {}),
    ...(typeof o.freshness === "function" ? { freshness: o.freshness as FreshnessCheck } : {}),
  });
  const stops = new AbortController();
  const controller = new FluxClaimController({
    client,
    log,
    ...(num(o.shortRequeueMs) !== undefined ? { shortRequeueMs: num(o.shortRequeueMs) } : {}),
    ...(num(o.resyncMs) !== undefined ? { resyncMs: num(o.resyncMs) } : {}),
    ...(num(o.releaseGiveUpMs) !== undefined ? { releaseGiveUpMs: num(o.releaseGiveUpMs) } : {}),
    // An external resume's record is followed here, registered as followed while it runs.
    followRecord(r) {
      let unfollow: () => void;
      try {
        unfollow = deps.following.follow(r.operation.token, `${r.claim.namespace}/${r.claim.name}`);
      } catch {
        return; // followed already
      }
      const claim: ClaimRef = { kind: "FluxClaim", namespace: r.claim.namespace, name: r.claim.name };
      const report: ReportFn = async (phase, extra = {}) => {
        if (!r.branchKey) return;
        await deps.reporter
          .phase({
            token: r.operation.token,
            claim,
            branchKey: r.branchKey,
            phase,
            at: deps.now().toISOString(),
            commit: extra.commit ?? r.operation.commit,
            ...(extra.reason ? { reason: extra.reason } : {}),
            ...(extra.message ? { message: extra.message } : {}),
          })
          .catch((err) => log.warn({ err: (err as Error).message }, "could not report"));
      };
      executor
        .recover(r, report, stops.signal)
        .catch((err) =>
          log.warn({ err: (err as Error).message, token: r.operation.token }, "following a record failed"),
        )
        .finally(() => unfollow());
    },
  });
  const stopController = controller.stop.bind(controller);
  controller.stop = async () => {
    stops.abort();
    await stopController();
  };
  return { executor, controller, windowObserver };
}
