/**
 * The Flux applier kind: what `applygate sidecar --applier flux` plugs into the shared sidecar.
 * Its settings are `FluxKindOptions`; the safety checks come as deps.checks.
 */
import type { ApplierDeps, ApplierKindModule } from "../applier-kind.js";
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

/** The Flux kind's settings, all optional, in milliseconds. */
export interface FluxKindOptions extends Partial<FluxTimings> {
  /** Between reads of the Kustomization and its source while following. */
  pollMs?: number;
  /** The claim reconciler's short requeue (waiting for a suspend token). */
  shortRequeueMs?: number;
  resyncMs?: number;
  /** How long after an operation ends its window still reports the applier's writes. */
  windowGraceMs?: number;
}

// Settings may come from JSON (scenario children): a value that is not a finite number is ignored.
const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : undefined);

export function createApplierKind(deps: ApplierDeps<FluxKindOptions>) {
  const o = deps.options;
  const log = deps.log;
  const client = new FluxClient(deps.kube, {
    log,
    now: deps.now,
    ...(num(o.pollMs) ? { pollMs: num(o.pollMs) } : {}),
  });
  const windowObserver = new FluxWindowObserver({
    kube: deps.kube,
    reporter: deps.reporter,
    log,
    now: deps.now,
    readKustomization: (ref) => client.observedKustomization(ref),
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
    checks: deps.checks,
  });
  const controller = new FluxClaimController({
    client,
    log,
    ...(num(o.shortRequeueMs) !== undefined ? { shortRequeueMs: num(o.shortRequeueMs) } : {}),
    ...(num(o.resyncMs) !== undefined ? { resyncMs: num(o.resyncMs) } : {}),
  });
  return { executor, controller, windowObserver };
}

/** Checked here so a change to the kind contract fails the build in this module. */
export const module: ApplierKindModule<FluxKindOptions> = { createApplierKind };
