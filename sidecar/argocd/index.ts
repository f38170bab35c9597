/**
 * The Argo CD applier kind: what `applygate sidecar --applier argocd` loads. Settings come from
 * deps.options: pollMs, busyWaitMs, budgetMs, maxPollMs, windowGraceMs, controlNamespace,
 * watchKinds ([{apiVersion, kind}]), ancestry (a function) or ancestryGitDir (a clone of the
 * repository to answer ancestry from), watchApplications (default true).
 */
import type { ApplierDeps, ApplierKindModule } from "../applier-kind.js";
import { cloneAncestry } from "./ancestry.js";
import { ArgoCDClaimController } from "./controller.js";
import { ArgoCDExecutor, type ArgoCDExecutorOptions } from "./executor.js";
import { ArgoCDWindowObserver, type WatchedKind } from "./observer.js";
import type { Ancestry } from "./stale.js";

export { cloneAncestry } from "./ancestry.js";
export { ArgoCDClaimController } from "./controller.js";
export { ArgoCDExecutor } from "./executor.js";
export { ArgoCDWindowObserver } from "./observer.js";
export type { Ancestry, AncestryAnswer } from "./stale.js";

const num = (v: unknown): number | undefined => (typeof v === "number" && Number.isFinite(v) ? v : undefined);

export function createApplierKind(deps: ApplierDeps) {
  const o = deps.options;
  const log = deps.log.child({ applier: "argocd" });
  const windowObserver = new ArgoCDWindowObserver({
    kube: deps.kube,
    reporter: deps.reporter,
    log,
    now: deps.now,
    ...(typeof o.controlNamespace === "string" ? { controlNamespace: o.controlNamespace } : {}),
    ...(Array.isArray(o.watchKinds) ? { kinds: o.watchKinds as WatchedKind[] } : {}),
    ...(num(o.windowGraceMs) !== undefined ? { graceMs: num(o.windowGraceMs) } : {}),
  });
  const ancestry: Ancestry | undefined =
    typeof o.ancestry === "function"
      ? (o.ancestry as Ancestry)
      : typeof o.ancestryGitDir === "string"
        ? cloneAncestry(o.ancestryGitDir)
        : undefined;
  const options: ArgoCDExecutorOptions = {};
  for (const k of ["pollMs", "busyWaitMs", "budgetMs", "maxPollMs"] as const) {
    const v = num(o[k]);
    if (v !== undefined) options[k] = v;
  }
  if (ancestry) options.ancestry = ancestry;
  // isCurrent: (attempt) => Promise<boolean>, whether the attempt's commit is still the tip.
  if (typeof o.isCurrent === "function")
    options.isCurrent = o.isCurrent as ArgoCDExecutorOptions["isCurrent"];
  const executor = new ArgoCDExecutor({
    kube: deps.kube,
    log,
    events: deps.events,
    now: deps.now,
    options,
    windows: windowObserver,
  });
  const controller = new ArgoCDClaimController({
    kube: deps.kube,
    log,
    watch: o.watchApplications !== false,
  });
  return { executor, controller, windowObserver };
}

/** Checked here so a change to the kind contract fails the build in this module. */
export const module: ApplierKindModule = { createApplierKind };
