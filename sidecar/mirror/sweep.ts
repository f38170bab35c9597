/**
 * The sweep a snapshot asks for under `prune.mode: Always` (pure): the kind, the namespaces the
 * rule watches that its GitTarget's scope holds, the rule's selector, and every live object of the
 * kind there. The branch worker compares it with the folder in Git (queue/git/sweep.ts).
 */
import type { SnapshotSweep } from "../../queue/contract.js";
import type { WatchRule } from "../../queue/crds/index.js";
import { checkKindScope, type Scope } from "../../queue/scope.js";
import { apiVersionOf, type ResolvedKind, watchedNamespaces } from "./rules.js";

/** The field manager a sweep's deletes are authored by. */
export const SWEEP_AUTHOR = "applygate-mirror";

type Live = { metadata: { name: string; namespace?: string } };

/** The sweep of one kind after a snapshot, or undefined when there is nothing the rule may sweep. */
export function sweepPlan(
  rule: WatchRule,
  scope: Scope,
  kind: ResolvedKind,
  objects: readonly Live[],
): SnapshotSweep | undefined {
  const apiVersion = apiVersionOf(kind);
  // A namespace (or the cluster scope) the GitTarget may not hold is not swept: its deletes would be refused.
  const inScope = (namespace?: string) =>
    checkKindScope(scope, { apiVersion, kind: kind.kind, ...(namespace ? { namespace } : {}) }).ok;
  const namespaces = kind.namespaced ? watchedNamespaces(rule).filter((ns) => inScope(ns)) : [];
  if (kind.namespaced ? namespaces.length === 0 : !inScope()) return undefined;
  const swept = new Set(namespaces);
  const live = objects
    .filter((o) => (kind.namespaced ? swept.has(o.metadata.namespace ?? "") : true))
    .map((o) => `${kind.namespaced ? (o.metadata.namespace ?? "") : ""}/${o.metadata.name}`)
    .sort();
  return {
    apiVersion,
    kind: kind.kind,
    namespaces,
    ...(rule.spec.selector ? { selector: rule.spec.selector } : {}),
    live,
  };
}
