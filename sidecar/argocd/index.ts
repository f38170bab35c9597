/**
 * The Argo CD applier kind: what `applygate sidecar --applier argocd` loads. Its settings are
 * `ArgoCDKindOptions`; the safety checks come as deps.checks. Without `ancestry` or
 * `ancestryGitDir`, ancestry comes from the sidecar's own clones under cacheDir (default under
 * the OS temp dir), fetched with the GitProvider's credentials within ancestryFetchDeadlineMs.
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

/** The Argo CD kind's settings, all optional (durations in milliseconds). */
export interface ArgoCDKindOptions {
  /** Between reads of an Application while its namespace's watch is not synced. */
  pollMs?: number;
  /** While the watch runs, an Application waited on is still read from the API server this often. */
  resyncMs?: number;
  busyWaitMs?: number;
  budgetMs?: number;
  maxPollMs?: number;
  /** How long after an operation ends its window still reports Argo CD's writes. */
  windowGraceMs?: number;
  /** Argo CD's own namespace (how Applications there track their objects). */
  controlNamespace?: string;
  /** Kinds whose writes by Argo CD the window observer watches. */
  watchKinds?: WatchedKind[];
  /** Answers ancestry (tests); else from a clone at ancestryGitDir; else the sidecar's own clones. */
  ancestry?: Ancestry;
  ancestryGitDir?: string;
  /** Folder of the sidecar's own clones. */
  cacheDir?: string;
  ancestryFetchDeadlineMs?: number;
  /** Send the GitProvider's credentials over plain http too (the sidecar's --allow-http-credentials). */
  allowHttpCredentials?: boolean;
  /** Watch Applications to requeue their claims (default true). */
  watchApplications?: boolean;
}

// Settings may come from JSON (scenario children): a value that is not a finite number is ignored.
const num = (v: unknown): number | undefined => (typeof v === "number" && Number.isFinite(v) ? v : undefined);

export function createApplierKind(deps: ApplierDeps<ArgoCDKindOptions>) {
  const o = deps.options;
  const log = deps.log;
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
  for (const k of ["pollMs", "resyncMs", "busyWaitMs", "budgetMs", "maxPollMs"] as const) {
    const v = num(o[k]);
    if (v !== undefined) options[k] = v;
  }
  if (ancestry) options.ancestry = ancestry;
  const executor = new ArgoCDExecutor({
    kube: deps.kube,
    log,
    events: deps.events,
    now: deps.now,
    options,
    checks: deps.checks,
    windows: windowObserver,
    ...(deps.supersessions ? { supersessions: deps.supersessions } : {}),
  });
  const controller = new ArgoCDClaimController({
    kube: deps.kube,
    log,
    watch: o.watchApplications !== false,
    now: deps.now,
  });
  return { executor, controller, windowObserver };
}

/** The sidecar's own clones, reached through the claim's GitTarget and GitProvider. */
function clusterAncestry(deps: ApplierDeps<ArgoCDKindOptions>, log: ApplierDeps["log"]): Ancestry {
  const o = deps.options;
  const git =
    deps.git ??
    new GitAncestry({
      cacheDir: typeof o.cacheDir === "string" && o.cacheDir !== "" ? o.cacheDir : defaultCacheDir(),
      remoteFor: remoteFromCluster(deps.kube, log, { allowHttpCredentials: o.allowHttpCredentials === true }),
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
export const module: ApplierKindModule<ArgoCDKindOptions> = { createApplierKind };
