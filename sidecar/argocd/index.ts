/**
 * The Argo CD applier kind: what `applygate sidecar --applier argocd` loads. Settings come from
 * deps.options: pollMs, busyWaitMs, budgetMs, maxPollMs, windowGraceMs, controlNamespace,
 * watchKinds ([{apiVersion, kind}]), ancestry (a function) or ancestryGitDir (a clone of the
 * repository to answer ancestry from), watchApplications (default true). Without either, ancestry
 * comes from the sidecar's own clones under cacheDir (default under the OS temp dir), fetched
 * with the GitProvider's credentials within ancestryFetchDeadlineMs.
 */
import type { ApplierDeps, ApplierKindModule } from "../applier-kind.js";
import { defaultCacheDir, GitAncestry, remoteFromCluster } from "../git-ancestry.js";
import { cloneAncestry } from "./ancestry.js";
import { sourceOf } from "./application.js";
import { ArgoCDClaimController } from "./controller.js";
import { ArgoCDExecutor, type ArgoCDExecutorOptions } from "./executor.js";
import { ArgoCDWindowObserver, type WatchedKind } from "./observer.js";
import type { Ancestry } from "./stale.js";

export { cloneAncestry } from "./ancestry.js";
export { ArgoCDClaimController } from "./controller.js";
export { ArgoCDExecutor } from "./executor.js";
export { ArgoCDWindowObserver } from "./observer.js";
export type { Ancestry, AncestryAbout, AncestryAnswer } from "./stale.js";

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
        : clusterAncestry(deps, log);
  const options: ArgoCDExecutorOptions = {};
  for (const k of ["pollMs", "busyWaitMs", "budgetMs", "maxPollMs"] as const) {
    const v = num(o[k]);
    if (v !== undefined) options[k] = v;
  }
  if (ancestry) options.ancestry = ancestry;
  // isCurrent: (attempt) => Promise<boolean>, whether the attempt's commit is still the tip.
  if (typeof o.isCurrent === "function")
    options.isCurrent = o.isCurrent as ArgoCDExecutorOptions["isCurrent"];
  // freshness: a FreshnessCheck asked just before the sync update (the tip and the edit recheck).
  if (typeof o.freshness === "function")
    options.freshness = o.freshness as ArgoCDExecutorOptions["freshness"];
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

/** The sidecar's own clones, reached through the claim's GitTarget and GitProvider. */
function clusterAncestry(deps: ApplierDeps, log: ApplierDeps["log"]): Ancestry {
  const o = deps.options;
  const git = new GitAncestry({
    cacheDir: typeof o.cacheDir === "string" && o.cacheDir !== "" ? o.cacheDir : defaultCacheDir(),
    remoteFor: remoteFromCluster(deps.kube, log),
    ...(num(o.ancestryFetchDeadlineMs) !== undefined
      ? { fetchDeadlineMs: num(o.ancestryFetchDeadlineMs) }
      : {}),
    log,
  });
  return async (revision, commit, about) => {
    const source = about ? sourceOf(about.application) : undefined;
    if (!about || source?.state !== "Known") return "unknown";
    return git.ask(
      {
        repoUrl: source.url,
        branch: source.branch,
        claim: { kind: "ArgoCDClaim", namespace: about.claim.namespace, name: about.claim.name },
      },
      revision,
      commit,
    );
  };
}

/** Checked here so a change to the kind contract fails the build in this module. */
export const module: ApplierKindModule = { createApplierKind };
