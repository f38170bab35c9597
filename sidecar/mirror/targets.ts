/**
 * What the watch plane needs of a GitTarget to hand it a write, read from the shared caches:
 * its branch key (from the GitProvider it may use), folder, scope under the ScopeGrants, and the
 * applier its claim holds. Pure over the cached objects.
 */

import { type ApplierRef, applierManagersOf, branchKey } from "../../queue/contract.js";
import { type GitProvider, type GitTarget, operation, type ScopeGrant } from "../../queue/crds/index.js";
import { StatusReason } from "../../queue/crds/reasons.js";
import {
  claimStatusField,
  claimStatusFields,
  fieldOf,
  type KObject,
  partOf,
} from "../../queue/kube/index.js";
import { applierOf, claimOf } from "../../queue/references.js";
import { type Scope, scopeOf } from "../../queue/scope.js";
import { judgeHolding, providerFacts, targetFacts } from "../../queue/tenancy.js";

export interface ResolvedTarget {
  namespace: string;
  name: string;
  uid?: string;
  branchKey: string;
  path: string;
  scope: Scope;
  /** The applier the GitTarget's claim holds; null when none (the folder excludes nothing). */
  applier: ApplierRef | null;
  /** The applier's own field managers: their writes alone are for the worker to judge. */
  applierManagers: readonly string[];
}

export type TargetLookup =
  | { ok: true; target: ResolvedTarget }
  | {
      ok: false;
      reason:
        | typeof StatusReason.TargetNotFound
        | typeof StatusReason.ProviderNotFound
        | typeof StatusReason.ProviderNamespaceNotAllowed
        | typeof StatusReason.RepositoryHeld
        | typeof StatusReason.FolderHeld;
      message: string;
    };

export interface TargetSources {
  target(namespace: string, name: string): GitTarget | undefined;
  provider(namespace: string, name: string): GitProvider | undefined;
  /** Every GitProvider and GitTarget: which hold each repository and folder (queue/tenancy.ts). */
  providers(): GitProvider[];
  targets(): GitTarget[];
  grants(): ScopeGrant[];
  /** A claim object by kind, namespace and name. */
  claim(kind: string, namespace: string, name: string): KObject | undefined;
}

export function lookupTarget(src: TargetSources, namespace: string, name: string): TargetLookup {
  const t = src.target(namespace, name);
  if (!t)
    return {
      ok: false,
      reason: StatusReason.TargetNotFound,
      message: `GitTarget ${namespace}/${name} not found`,
    };
  const pns = t.spec.providerRef.namespace ?? namespace;
  const p = src.provider(pns, t.spec.providerRef.name);
  if (!p)
    return {
      ok: false,
      reason: StatusReason.ProviderNotFound,
      message: `GitProvider ${pns}/${t.spec.providerRef.name} not found`,
    };
  // The worker's and the gateway's rules: the provider admits the namespace and may be used.
  const refused = judgeHolding(src.providers().map(providerFacts), src.targets().map(targetFacts)).target({
    namespace,
    name,
    providerNamespace: pns,
    providerName: p.metadata.name,
  });
  if (refused) return { ok: false, reason: refused.reason, message: refused.message };
  const claimRef = claimOf(t);
  const claim = claimRef ? src.claim(claimRef.kind, claimRef.namespace, claimRef.name) : undefined;
  const applier = claimRef && claim ? applierOf(claimRef, claim) : null;
  return {
    ok: true,
    target: {
      namespace,
      name,
      ...(t.metadata.uid ? { uid: t.metadata.uid } : {}),
      branchKey: branchKey({ namespace: pns, name: p.metadata.name }, p.spec.url, t.spec.branch),
      path: t.spec.path,
      scope: scopeOf({ namespace, name, allowedKinds: t.spec.allowedKinds }, src.grants()),
      applier,
      applierManagers: applier ? applierManagersOf(applier) : [],
    },
  };
}

/** The GitTarget's claim, read from the cache when asked (an apply is not a change of the target). */
function claimOfTarget(src: TargetSources, namespace: string, name: string): KObject | undefined {
  const t = src.target(namespace, name);
  const claimRef = t ? claimOf(t) : null;
  return claimRef ? src.claim(claimRef.kind, claimRef.namespace, claimRef.name) : undefined;
}

const commitOrUndefined = (v: string | undefined): string | undefined =>
  v !== undefined && v.length > 0 ? v : undefined;

/**
 * The commit the GitTarget's applier last applied, read from its claim's status when asked (not
 * part of the resolved target: an apply must not count as a change of the target).
 */
export function appliedCommitOf(src: TargetSources, namespace: string, name: string): string | undefined {
  return commitOrUndefined(claimStatusField(claimOfTarget(src, namespace, name), "lastAppliedCommit"));
}

/**
 * The commits the cluster may hold the GitTarget's objects from, as its claim's status says: the
 * commit its applier last applied, and the commit of its latest operation unless that one
 * succeeded (in flight, its apply may be halfway; failed, it may have applied part). Empty without
 * a claim or an applied commit.
 */
export function clusterCommitsOf(src: TargetSources, namespace: string, name: string): string[] {
  const claim = claimOfTarget(src, namespace, name);
  const applied = commitOrUndefined(claimStatusField(claim, "lastAppliedCommit"));
  // The operation's fields one by one: its commit counts whatever else it holds.
  const op = partOf(claimStatusFields, claim?.status, "operation");
  const opCommit =
    fieldOf(operation, op, "phase") !== "Succeeded"
      ? commitOrUndefined(fieldOf(operation, op, "commit"))
      : undefined;
  return [...new Set([applied, opCommit].filter((c): c is string => c !== undefined))];
}
