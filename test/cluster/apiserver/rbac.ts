/**
 * Kubernetes RBAC, as the real authorizer evaluates it: Roles and ClusterRoles (verbs, apiGroups,
 * resources with subresources, resourceNames, nonResourceURLs) granted to a user, a group or a
 * ServiceAccount by RoleBindings (in their namespace only) and ClusterRoleBindings (everywhere).
 * Nothing is denied explicitly: a request is allowed when some bound rule covers it. The policy is
 * whatever Roles and bindings the cluster stores, plus the bootstrap policy every API server has
 * (discovery for authenticated users). Pure functions; the handlers read the stored objects.
 */
import { allowed as allowedByOwnRules, type User } from "./auth.js";
import type { KObject } from "./types.js";

export interface PolicyRule {
  verbs: string[];
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
}

export interface Subject {
  kind: string;
  name: string;
  namespace?: string;
  apiGroup?: string;
}

interface RoleObject extends KObject {
  rules?: PolicyRule[] | null;
  aggregationRule?: { clusterRoleSelectors?: { matchLabels?: Record<string, string> }[] | null } | null;
}

interface BindingObject extends KObject {
  roleRef: { apiGroup?: string; kind: string; name: string };
  subjects?: Subject[] | null;
}

/** The stored RBAC objects a decision reads. */
export interface Policy {
  roles: KObject[];
  clusterRoles: KObject[];
  roleBindings: KObject[];
  clusterRoleBindings: KObject[];
}

/** What a request asks for: a resource (with group, namespace, name, subresource) or a plain path. */
export type RequestAttributes =
  | {
      verb: string;
      group: string;
      resource: string;
      subresource?: string;
      namespace?: string;
      name?: string;
    }
  | { verb: string; path: string };

export interface Decision {
  allowed: boolean;
  /** Why, in the words of the real authorizer (the audit annotation authorization.k8s.io/reason). */
  reason: string;
}

const READ = ["get", "list", "watch"];
const WRITE = ["create", "update", "patch", "delete", "deletecollection"];
const AGGREGATE = (to: "admin" | "edit" | "view") => ({
  [`rbac.authorization.k8s.io/aggregate-to-${to}`]: "true",
});

/**
 * The bootstrap policy: the discovery grants (system:discovery, system:public-info-viewer) and the
 * user-facing roles admin, edit and view, aggregated as on a real server: each holds the rules of
 * every ClusterRole labelled aggregate-to-<role>, and `view` is itself labelled aggregate-to-edit
 * and `edit` aggregate-to-admin, so what view grants edit and admin grant too. The system:aggregate-
 * to-* roles carry the core and apps parts of the real rules.
 */
export const bootstrap: Policy = {
  roles: [],
  roleBindings: [],
  clusterRoles: [
    aggregating("admin", {}, "admin"),
    aggregating("edit", AGGREGATE("admin"), "edit"),
    aggregating("view", AGGREGATE("edit"), "view"),
    role(
      "system:aggregate-to-admin",
      [
        { verbs: ["create"], apiGroups: ["authorization.k8s.io"], resources: ["localsubjectaccessreviews"] },
        {
          verbs: [...READ, ...WRITE],
          apiGroups: ["rbac.authorization.k8s.io"],
          resources: ["roles", "rolebindings"],
        },
      ],
      AGGREGATE("admin"),
    ),
    role(
      "system:aggregate-to-edit",
      [
        { verbs: READ, apiGroups: [""], resources: ["secrets"] },
        { verbs: ["impersonate"], apiGroups: [""], resources: ["serviceaccounts"] },
        {
          verbs: WRITE,
          apiGroups: [""],
          resources: [
            "pods",
            "services",
            "endpoints",
            "persistentvolumeclaims",
            "configmaps",
            "secrets",
            "serviceaccounts",
          ],
        },
        {
          verbs: WRITE,
          apiGroups: ["apps"],
          resources: ["statefulsets", "daemonsets", "deployments", "deployments/scale", "replicasets"],
        },
      ],
      AGGREGATE("edit"),
    ),
    role(
      "system:aggregate-to-view",
      [
        {
          verbs: READ,
          apiGroups: [""],
          resources: [
            "pods",
            "pods/log",
            "services",
            "endpoints",
            "persistentvolumeclaims",
            "configmaps",
            "serviceaccounts",
            "events",
            "namespaces",
          ],
        },
        {
          verbs: READ,
          apiGroups: ["apps"],
          resources: ["statefulsets", "daemonsets", "deployments", "deployments/scale", "replicasets"],
        },
      ],
      AGGREGATE("view"),
    ),
    role("system:discovery", [
      {
        verbs: ["get"],
        nonResourceURLs: [
          "/api",
          "/api/*",
          "/apis",
          "/apis/*",
          "/healthz",
          "/livez",
          "/openapi",
          "/openapi/*",
          "/readyz",
          "/version",
          "/version/",
        ],
      },
    ]),
    role("system:public-info-viewer", [
      { verbs: ["get"], nonResourceURLs: ["/healthz", "/livez", "/readyz", "/version", "/version/"] },
    ]),
  ],
  clusterRoleBindings: [
    binding("system:discovery", [{ kind: "Group", name: "system:authenticated" }]),
    binding("system:public-info-viewer", [
      { kind: "Group", name: "system:authenticated" },
      { kind: "Group", name: "system:unauthenticated" },
    ]),
  ],
};

function role(name: string, rules: PolicyRule[], labels?: Record<string, string>): RoleObject {
  return {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "ClusterRole",
    metadata: { name, ...(labels ? { labels } : {}) },
    rules,
  };
}

/** A ClusterRole made of the rules of every ClusterRole labelled aggregate-to-<to>. */
function aggregating(
  name: string,
  labels: Record<string, string>,
  to: "admin" | "edit" | "view",
): RoleObject {
  return {
    ...role(name, [], labels),
    aggregationRule: { clusterRoleSelectors: [{ matchLabels: AGGREGATE(to) }] },
  };
}

function binding(name: string, subjects: Subject[]): BindingObject {
  return {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "ClusterRoleBinding",
    metadata: { name },
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name },
    subjects: subjects.map((s) => ({ apiGroup: "rbac.authorization.k8s.io", ...s })),
  };
}

const covers = (list: string[] | undefined, v: string) => !!list && (list.includes("*") || list.includes(v));

function subjectMatches(s: Subject, user: Pick<User, "name" | "groups">): boolean {
  switch (s.kind) {
    case "ServiceAccount":
      return user.name === `system:serviceaccount:${s.namespace ?? ""}:${s.name}`;
    case "User":
      return user.name === s.name;
    case "Group":
      return user.groups.includes(s.name);
    default:
      return false;
  }
}

function nonResourceMatches(patterns: string[] | undefined, path: string): boolean {
  return (patterns ?? []).some(
    (p) => p === "*" || p === path || (p.endsWith("*") && path.startsWith(p.slice(0, -1))),
  );
}

/** Whether one rule covers the request (a rule names resources or paths, never both). */
export function ruleAllows(rule: PolicyRule, a: RequestAttributes): boolean {
  if (!covers(rule.verbs, a.verb)) return false;
  if ("path" in a) return nonResourceMatches(rule.nonResourceURLs, a.path);
  if (!covers(rule.apiGroups, a.group)) return false;
  const resources = rule.resources ?? [];
  const wanted = a.subresource ? `${a.resource}/${a.subresource}` : a.resource;
  const resourceOk =
    resources.includes("*") ||
    resources.includes(wanted) ||
    (a.subresource !== undefined &&
      (resources.includes(`*/${a.subresource}`) || resources.includes(`${a.resource}/*`)));
  if (!resourceOk) return false;
  if (rule.resourceNames?.length) return a.name !== undefined && rule.resourceNames.includes(a.name);
  return true;
}

const subjectText = (s: Subject) =>
  s.kind === "ServiceAccount" ? `ServiceAccount "${s.name}/${s.namespace}"` : `${s.kind} "${s.name}"`;

/** The RBAC decision for a user's request under a policy (the bootstrap policy is always added). */
export function authorize(
  user: Pick<User, "name" | "groups">,
  a: RequestAttributes,
  stored: Policy,
): Decision {
  // As the real request info has it, a Namespace's own requests are in that namespace.
  const namespace =
    "path" in a
      ? undefined
      : (a.namespace ?? (a.group === "" && a.resource === "namespaces" ? a.name : undefined));
  const clusterRoles = [...bootstrap.clusterRoles, ...stored.clusterRoles] as RoleObject[];
  // A ClusterRole with an aggregationRule holds the rules of every ClusterRole its selectors
  // match, as kube-controller-manager's clusterrole-aggregation controller keeps it (at once here).
  // The controller writes those rules into the aggregating role, so a role matched that aggregates
  // itself brings what it aggregated (view's into edit, edit's into admin).
  const aggregated = (r: RoleObject, seen: ReadonlySet<RoleObject> = new Set()): RoleObject => {
    const selectors = r.aggregationRule?.clusterRoleSelectors ?? [];
    if (selectors.length === 0) return r;
    const matches = (o: RoleObject) =>
      selectors.some((sel) =>
        Object.entries(sel.matchLabels ?? {}).every(([k, v]) => o.metadata.labels?.[k] === v),
      );
    const inside = new Set([...seen, r]);
    const rules = clusterRoles
      .filter((o) => !inside.has(o) && matches(o))
      .flatMap((o) => aggregated(o, inside).rules ?? []);
    return { ...r, rules: [...(r.rules ?? []), ...rules] };
  };
  const clusterRole = (name: string) => {
    const r = clusterRoles.find((o) => o.metadata.name === name);
    return r ? aggregated(r) : undefined;
  };
  const referenced = (b: BindingObject, ns?: string): RoleObject | undefined =>
    b.roleRef.kind === "ClusterRole"
      ? clusterRole(b.roleRef.name)
      : (stored.roles.find((r) => r.metadata.namespace === ns && r.metadata.name === b.roleRef.name) as
          | RoleObject
          | undefined);
  const grants = (b: BindingObject, ns?: string) => {
    const subject = (b.subjects ?? []).find((s) => subjectMatches(s, user));
    if (!subject) return undefined;
    // A path request has no namespace, so only ClusterRoleBindings grant non-resource URLs.
    return (referenced(b, ns)?.rules ?? []).some((rule) => ruleAllows(rule, a)) ? subject : undefined;
  };
  for (const b of [...bootstrap.clusterRoleBindings, ...stored.clusterRoleBindings] as BindingObject[]) {
    const s = grants(b);
    if (s)
      return {
        allowed: true,
        reason: `RBAC: allowed by ClusterRoleBinding "${b.metadata.name}" of ClusterRole "${b.roleRef.name}" to ${subjectText(s)}`,
      };
  }
  if (namespace !== undefined)
    for (const b of stored.roleBindings as BindingObject[]) {
      if (b.metadata.namespace !== namespace) continue;
      const s = grants(b, namespace);
      if (s)
        return {
          allowed: true,
          reason: `RBAC: allowed by RoleBinding "${b.metadata.name}/${namespace}" of ${b.roleRef.kind} "${b.roleRef.name}" to ${subjectText(s)}`,
        };
    }
  return { allowed: false, reason: "" };
}

/** A user's decision: superusers and users with rules of their own are decided without RBAC. */
export function decide(user: User, a: RequestAttributes, policy: () => Policy): Decision {
  if (user.rules === "all") return { allowed: true, reason: "" };
  if (user.rules === "rbac") return authorize(user, a, policy());
  if ("path" in a) return { allowed: true, reason: "" };
  const ok = allowedByOwnRules(user, {
    verb: a.verb,
    group: a.group,
    resource: a.resource,
    subresource: a.subresource,
    namespace: a.namespace,
  });
  return { allowed: ok, reason: ok ? "allowed by the user's own rules" : "" };
}
