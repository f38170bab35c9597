/**
 * What the watch plane needs of a GitTarget to hand it a write, read from the shared caches:
 * its branch key (from the GitProvider it may use), folder, scope under the ScopeGrants, and the
 * applier its claim holds. Pure over the cached objects.
 */

import { applierOf, claimOf, type KubeLike } from "../../queue/apply/catalog.js";
import { type ApplierRef, applierManagersOf, branchKey } from "../../queue/contract.js";
import {
  type GitProvider,
  type GitTarget,
  providerRefusal,
  type ScopeGrant,
} from "../../queue/crds/index.js";
import { StatusReason } from "../../queue/crds/reasons.js";
import { type Scope, scopeOf } from "../../queue/scope.js";

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
        | typeof StatusReason.ProviderNamespaceNotAllowed;
      message: string;
    };

export interface TargetSources {
  target(namespace: string, name: string): GitTarget | undefined;
  provider(namespace: string, name: string): GitProvider | undefined;
  grants(): ScopeGrant[];
  /** A claim object by kind, namespace and name. */
  claim(kind: string, namespace: string, name: string): KubeLike | undefined;
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
  const refused = providerRefusal(
    { namespace },
    { namespace: pns, name: p.metadata.name, accessFrom: p.spec.accessFrom },
  );
  if (refused) return { ok: false, reason: refused.reason, message: refused.message };
  const claimRef = claimOf(t as unknown as KubeLike);
  const claim = claimRef ? src.claim(claimRef.kind, claimRef.namespace, claimRef.name) : undefined;
  const applier = claimRef && claim ? applierOf(claimRef, claim) : null;
  return {
    ok: true,
    target: {
      namespace,
      name,
      ...(t.metadata.uid ? { uid: t.metadata.uid } : {}),
      branchKey: branchKey(p.spec.url, t.spec.branch),
      path: t.spec.path,
      scope: scopeOf({ namespace, name, allowedKinds: t.spec.allowedKinds }, src.grants()),
      applier,
      applierManagers: applier ? applierManagersOf(applier) : [],
    },
  };
}

/**
 * The commit the GitTarget's applier last applied, read from its claim's status when asked (not
 * part of the resolved target: an apply must not count as a change of the target).
 */
export function appliedCommitOf(src: TargetSources, namespace: string, name: string): string | undefined {
  const t = src.target(namespace, name);
  const claimRef = t ? claimOf(t as unknown as KubeLike) : null;
  const claim = claimRef ? src.claim(claimRef.kind, claimRef.namespace, claimRef.name) : undefined;
  const last = (claim?.status as { lastAppliedCommit?: unknown } | undefined)?.lastAppliedCommit;
  return typeof last === "string" && last.length > 0 ? last : undefined;
}
