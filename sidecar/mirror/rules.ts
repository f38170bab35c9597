/**
 * Which WatchRules select a watched object (pure): its kind, a namespace the rule watches and its
 * GitTarget's scope holds, and the rule's label selector. A rule watches its own namespace unless
 * it names others, and another namespace or a cluster-scoped kind only as far as the GitTarget's
 * scope reaches, which only a cluster administrator's ScopeGrant widens.
 */
import type { WatchedKind, WatchRule } from "../../queue/crds/index.js";
import { checkScope, type Scope } from "../../queue/scope.js";
import { matchesSelector } from "../../queue/selector.js";

export { matchesSelector };

/** A kind as discovery serves it. */
export interface ResolvedKind {
  group: string;
  version: string;
  kind: string;
  resource: string;
  namespaced: boolean;
}

export const apiVersionOf = (k: { group: string; version: string }) =>
  k.group ? `${k.group}/${k.version}` : k.version;

/** The key of a resolved kind: one informer each, shared by every rule that selects it. */
export const kindKey = (k: ResolvedKind) => `${apiVersionOf(k)}/${k.resource}`;

/** How a WatchRule names a kind, for its status and logs. */
export function describeKind(k: WatchedKind): string {
  return `${apiVersionOf(k)} ${k.kind ?? k.resource}`;
}

/** Whether the kind a rule names is this served one. */
export function namesKind(k: WatchedKind, r: ResolvedKind): boolean {
  return (
    k.group === r.group &&
    k.version === r.version &&
    (k.kind !== undefined ? k.kind === r.kind : k.resource === r.resource)
  );
}

/** The namespaces a rule watches: those it names, else its own. */
export function watchedNamespaces(rule: WatchRule): string[] {
  const own = rule.metadata.namespace ?? "";
  return rule.spec.namespaces && rule.spec.namespaces.length > 0 ? rule.spec.namespaces : [own];
}

export type Selection = { selected: true } | { selected: false; outOfScope?: string };

type Watched = { metadata: { name: string; namespace?: string; labels?: Record<string, string> } };

/**
 * Whether `rule` selects `obj` of kind `kind`, with its GitTarget's `scope`. An object the rule
 * would take but the scope does not hold answers `outOfScope` (a refusal the rule counts).
 */
export function selects(rule: WatchRule, scope: Scope, kind: ResolvedKind, obj: Watched): Selection {
  if (rule.spec.suspend === true) return { selected: false };
  if (!rule.spec.kinds.some((k) => namesKind(k, kind))) return { selected: false };
  const ns = obj.metadata.namespace;
  if (kind.namespaced && (ns === undefined || !watchedNamespaces(rule).includes(ns)))
    return { selected: false };
  if (!matchesSelector(rule.spec.selector, obj.metadata.labels ?? {})) return { selected: false };
  const verdict = checkScope(scope, {
    apiVersion: apiVersionOf(kind),
    kind: kind.kind,
    name: obj.metadata.name,
    ...(kind.namespaced && ns ? { namespace: ns } : {}),
  });
  return verdict.ok ? { selected: true } : { selected: false, outOfScope: verdict.message };
}
