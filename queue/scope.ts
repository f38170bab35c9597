/**
 * What a GitTarget may hold: the trust rule at the door. Whatever a write carries is committed to
 * Git and then applied by Flux or Argo CD, usually with cluster-admin rights, so a target's intake
 * token must not carry more than the target's own namespace. A GitTarget in namespace N holds
 * namespaced objects in N; other namespaces, cluster-scoped objects and privileged kinds need a
 * ScopeGrant (cluster-scoped, so only a cluster administrator makes one). A target's
 * `allowedKinds` narrows further. Pure: the gateway checks every write with it before queueing,
 * and the branch worker checks every write it receives again before committing.
 */
import type { KindRef, ScopeGrant } from "./crds/index.js";
import { StatusReason } from "./crds/reasons.js";

export type { KindRef };

/**
 * Kinds that carry privilege whatever namespace they sit in: access control, API and admission
 * configuration, namespaces, scheduling priority, and appliers' own objects (a Kustomization or an
 * Application applies whatever it points at with its controller's rights). Every known
 * cluster-scoped kind is here too; an object written without a namespace counts as cluster-scoped.
 */
export const PRIVILEGED_KINDS: readonly KindRef[] = [
  { group: "rbac.authorization.k8s.io", kind: "*" },
  { group: "apiextensions.k8s.io", kind: "*" },
  { group: "admissionregistration.k8s.io", kind: "*" },
  { group: "apiregistration.k8s.io", kind: "*" },
  { group: "certificates.k8s.io", kind: "*" },
  { group: "scheduling.k8s.io", kind: "*" },
  { group: "storage.k8s.io", kind: "*" },
  { group: "node.k8s.io", kind: "*" },
  { group: "flowcontrol.apiserver.k8s.io", kind: "*" },
  { group: "applygate.dev", kind: "*" },
  { group: "kustomize.toolkit.fluxcd.io", kind: "*" },
  { group: "helm.toolkit.fluxcd.io", kind: "*" },
  { group: "argoproj.io", kind: "*" },
  { group: "", kind: "Namespace" },
  { group: "", kind: "Node" },
  { group: "", kind: "PersistentVolume" },
  // An identity: a RoleBinding or ClusterRoleBinding anywhere may name a ServiceAccount that does
  // not exist yet, and whoever creates it (here: the applier, with its rights) receives that grant
  // and can mint its tokens.
  { group: "", kind: "ServiceAccount" },
  { group: "networking.k8s.io", kind: "IngressClass" },
];

/** Everything one GitTarget may hold: its namespace plus what its grants add, minus its narrowing. */
export interface Scope {
  namespace: string;
  name: string;
  /** Extra namespaces for namespaced objects; "*" for every namespace. */
  namespaces: string[];
  /** Privileged and cluster-scoped kinds granted. */
  kinds: KindRef[];
  /** The GitTarget's own allow-list; undefined holds every kind the rest allows. */
  allowedKinds?: KindRef[];
  /** Names of the ScopeGrants that apply. */
  grants: string[];
}

export type ScopeReason =
  | typeof StatusReason.SecretRefused
  | typeof StatusReason.KindNotAllowed
  | typeof StatusReason.ForeignNamespace
  | typeof StatusReason.PrivilegedKind
  | typeof StatusReason.ClusterScoped;

export type ScopeVerdict =
  | { ok: true }
  | {
      ok: false;
      reason: ScopeReason;
      /** `ClusterRole evil` or `ConfigMap kube-system/x`. */
      object: string;
      /** The rule that refused it, in words. */
      message: string;
    };

/** The object a change names, as the scope sees it. */
export interface ScopedRef {
  apiVersion: string;
  kind: string;
  name: string;
  namespace?: string;
}

export function groupOfApiVersion(apiVersion: string): string {
  const slash = apiVersion.indexOf("/");
  return slash < 0 ? "" : apiVersion.slice(0, slash);
}

function matches(list: readonly KindRef[], group: string, kind: string): boolean {
  return list.some((k) => k.group === group && (k.kind === "*" || k.kind === kind));
}

export function isPrivileged(group: string, kind: string): boolean {
  return matches(PRIVILEGED_KINDS, group, kind);
}

/** The scope of one GitTarget under the given grants. Pure. */
export function scopeOf(
  target: { namespace: string; name: string; allowedKinds?: KindRef[] | undefined },
  grants: readonly ScopeGrant[],
): Scope {
  const namespaces = new Set<string>();
  const kinds: KindRef[] = [];
  const names: string[] = [];
  for (const g of grants) {
    const applies = g.spec.targets.some(
      (t) => t.namespace === target.namespace && (t.name === undefined || t.name === target.name),
    );
    if (!applies) continue;
    names.push(g.metadata.name);
    for (const ns of g.spec.namespaces ?? []) namespaces.add(ns);
    for (const k of g.spec.kinds ?? []) if (!matches(kinds, k.group, k.kind)) kinds.push(k);
  }
  const scope: Scope = {
    namespace: target.namespace,
    name: target.name,
    namespaces: [...namespaces].sort(),
    kinds,
    grants: names.sort(),
  };
  if (target.allowedKinds) scope.allowedKinds = target.allowedKinds;
  return scope;
}

/** The scope of a target no grant names: its own namespace, no privileged kind. */
export function ownScope(target: { namespace: string; name: string; allowedKinds?: KindRef[] }): Scope {
  return scopeOf(target, []);
}

/** Does the scope hold this object? Pure; the answer names the object and the rule. */
export function checkScope(scope: Scope, ref: ScopedRef): ScopeVerdict {
  const shown = `${ref.kind} ${ref.namespace ? `${ref.namespace}/` : ""}${ref.name}`;
  const v = checkKindScope(scope, ref);
  return v.ok ? v : { ...v, object: shown, message: `${shown}: ${v.message}` };
}

/**
 * Does the scope hold objects of this kind in this namespace (none: cluster-scoped)? Pure. What a
 * scope holds never depends on an object's name or labels, so this answers for every object of
 * the kind there, and its answer names only the kind and the namespace: what a rule asks about
 * can be judged, and told, before any object is looked at.
 */
export function checkKindScope(
  scope: Scope,
  ref: Pick<ScopedRef, "apiVersion" | "kind" | "namespace">,
): ScopeVerdict {
  const group = groupOfApiVersion(ref.apiVersion);
  const shown = ref.namespace ? `${ref.kind} in namespace ${ref.namespace}` : `${ref.kind} (cluster-scoped)`;
  const target = `GitTarget ${scope.namespace}/${scope.name}`;
  const refuse = (reason: ScopeReason, message: string): ScopeVerdict => ({
    ok: false,
    reason,
    object: shown,
    message,
  });
  const qualified = group ? `${ref.kind}.${group}` : ref.kind;
  if (scope.allowedKinds && !matches(scope.allowedKinds, group, ref.kind))
    return refuse(StatusReason.KindNotAllowed, `${target} allows only the kinds in its spec.allowedKinds`);
  if (!ref.namespace) {
    if (!matches(scope.kinds, group, ref.kind))
      return refuse(
        StatusReason.ClusterScoped,
        `${target} holds no cluster-scoped objects (no namespace) unless a ScopeGrant names kind ${qualified}`,
      );
    return { ok: true };
  }
  if (isPrivileged(group, ref.kind) && !matches(scope.kinds, group, ref.kind))
    return refuse(
      StatusReason.PrivilegedKind,
      `${target} holds kind ${qualified} only if a ScopeGrant names it`,
    );
  if (
    ref.namespace !== scope.namespace &&
    !scope.namespaces.includes("*") &&
    !scope.namespaces.includes(ref.namespace)
  )
    return refuse(
      StatusReason.ForeignNamespace,
      `${target} holds namespaced objects in ${scope.namespace} only unless a ScopeGrant names namespace ${ref.namespace}`,
    );
  return { ok: true };
}

/** A change as both the intake and the inbox hold it. */
export type ScopedChange =
  | {
      op: "upsert";
      object: { apiVersion: string; kind: string; metadata: { name: string; namespace?: string } };
    }
  | { op: "delete"; ref: ScopedRef };

export function refOfChange(c: ScopedChange): ScopedRef {
  if (c.op === "delete") return c.ref;
  const { apiVersion, kind, metadata } = c.object;
  return {
    apiVersion,
    kind,
    name: metadata.name,
    ...(metadata.namespace ? { namespace: metadata.namespace } : {}),
  };
}

/** Why a Secret is never held: the watch plane refuses one with the same words. */
export const SECRET_IN_CLEAR_TEXT = "a Secret is never written to Git in clear text";

/**
 * Whether a change would put a Secret's values into Git as they are. No grant lets it: a folder is
 * read by everyone who may read the repository. (Deleting one writes no value.)
 */
export function isClearTextSecret(c: ScopedChange): boolean {
  return c.op === "upsert" && groupOfApiVersion(c.object.apiVersion) === "" && c.object.kind === "Secret";
}

/** The first change of a write the scope does not hold, with its index; ok when it holds all. */
export function checkChanges(
  scope: Scope,
  changes: readonly ScopedChange[],
): { ok: true } | (Extract<ScopeVerdict, { ok: false }> & { index: number }) {
  for (let i = 0; i < changes.length; i++) {
    const c = changes[i] as ScopedChange;
    const v = checkScope(scope, refOfChange(c));
    if (!v.ok) return { ...v, index: i };
    if (isClearTextSecret(c)) {
      const ref = refOfChange(c);
      const shown = `Secret ${ref.namespace ? `${ref.namespace}/` : ""}${ref.name}`;
      return {
        ok: false,
        reason: StatusReason.SecretRefused,
        object: shown,
        message: `${shown}: ${SECRET_IN_CLEAR_TEXT} (write a SealedSecret or an ExternalSecret instead)`,
        index: i,
      };
    }
  }
  return { ok: true };
}
