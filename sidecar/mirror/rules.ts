/**
 * Which WatchRules select a watched object (pure): its kind, a namespace the rule watches and its
 * GitTarget's scope holds, and the rule's label selector. A rule watches its own namespace unless
 * it names others, and another namespace or a cluster-scoped kind only as far as the GitTarget's
 * scope reaches, which only a cluster administrator's ScopeGrant widens. The scope is judged
 * before the selector, and for the kind and namespace alone: an object the rule may not hold is
 * never looked at for it, so neither its name nor whether it matches the selector can reach the
 * rule's status (no label oracle).
 */
import type { WatchedKind, WatchRule } from "../../queue/crds/index.js";
import { checkKindScope, type Scope } from "../../queue/scope.js";
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

/**
 * Why the mirror never watches this kind, whatever its RBAC: Secrets, since a Secret is never
 * written to Git in clear text (refused before any list, so the mirror never holds one).
 */
export function kindRefusal(kind: Pick<ResolvedKind, "group" | "kind">): string | undefined {
  return kind.group === "" && kind.kind === "Secret"
    ? "Secrets are never mirrored: a Secret is never written to Git in clear text"
    : undefined;
}

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

export type Selection = { selected: boolean };

type Watched = { metadata: { name: string; namespace?: string; labels?: Record<string, string> } };

/** Whether `rule` selects `obj` of kind `kind`, with its GitTarget's `scope`. */
export function selects(rule: WatchRule, scope: Scope, kind: ResolvedKind, obj: Watched): Selection {
  if (rule.spec.suspend === true) return { selected: false };
  if (!rule.spec.kinds.some((k) => namesKind(k, kind))) return { selected: false };
  const ns = obj.metadata.namespace;
  if (kind.namespaced && (ns === undefined || !watchedNamespaces(rule).includes(ns)))
    return { selected: false };
  // The scope first: an object the GitTarget may not hold is not judged by the selector at all.
  const held = checkKindScope(scope, {
    apiVersion: apiVersionOf(kind),
    kind: kind.kind,
    ...(kind.namespaced && ns ? { namespace: ns } : {}),
  });
  if (!held.ok) return { selected: false };
  return { selected: matchesSelector(rule.spec.selector, obj.metadata.labels ?? {}) };
}

/**
 * What a rule names that its GitTarget may not hold, from the rule, its kinds and the scope alone
 * (never an object): one line per kind and namespace, for the rule's status. Nothing there is
 * watched for the rule.
 */
export function outOfScope(rule: WatchRule, scope: Scope, kinds: readonly ResolvedKind[]): string[] {
  const out: string[] = [];
  for (const kind of kinds) {
    const where = kind.namespaced ? watchedNamespaces(rule) : [undefined];
    for (const namespace of where) {
      const v = checkKindScope(scope, {
        apiVersion: apiVersionOf(kind),
        kind: kind.kind,
        ...(namespace ? { namespace } : {}),
      });
      if (!v.ok) out.push(`${v.object}: ${v.message} (${v.reason})`);
    }
  }
  return out;
}
