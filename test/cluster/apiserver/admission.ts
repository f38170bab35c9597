/**
 * What the API server checks of a write after authorization, besides the schema: RBAC's refusal of
 * escalation (a Role may grant, and a binding bind, only what its maker holds, unless the maker
 * may `escalate` or `bind` it), and ValidatingAdmissionPolicies with their bindings, evaluated in
 * CEL as kube-apiserver does. Pure over the stored objects; objects.ts calls it for every create,
 * update and delete.
 *
 * Of ValidatingAdmissionPolicy this evaluates what applygate's policies use and what commonly goes
 * with it: `matchConstraints` and a binding's `matchResources` (resourceRules and
 * excludeResourceRules by group, version, operation and resource or subresource; namespaceSelector
 * and objectSelector by matchLabels and matchExpressions), `matchConditions`, `variables`,
 * `validations` (expression, message, messageExpression, reason), `failurePolicy`, and the action
 * Deny (Warn and Audit deny nothing). The variables bound are `object`, `oldObject`, `request`
 * (operation, userInfo, namespace, name, kind, resource, subResource, dryRun), `namespaceObject`
 * and `variables`; `params` is always null (paramKind is not evaluated) and `authorizer` is not
 * bound, so a policy using either fails by its failurePolicy. The real tier checks the shipped
 * policies against kube-apiserver itself.
 */
import { isCelError, run } from "@bufbuild/cel";
import { strings } from "@bufbuild/cel/ext";
import type { User } from "./auth.js";
import { ApiError } from "./errors.js";
import { bootstrap, decide, type Policy, type PolicyRule } from "./rbac.js";
import type { KObject, ResourceType } from "./types.js";

export type Operation = "CREATE" | "UPDATE" | "DELETE";

export interface AdmissionRequest {
  operation: Operation;
  type: ResourceType;
  subresource?: string;
  namespace?: string;
  name: string;
  /** The object as it would be stored (null for a delete). */
  object: KObject | null;
  /** The object as stored before (null for a create). */
  oldObject: KObject | null;
  user: Pick<User, "name" | "groups" | "rules">;
  dryRun: boolean;
}

export interface AdmissionContext {
  policy: () => Policy;
  /** The stored ValidatingAdmissionPolicies and their bindings. */
  policies: () => { policies: KObject[]; bindings: KObject[] };
  namespace: (name: string) => KObject | undefined;
}

/** Throws the API server's refusal of the request, if any. */
export function admit(ctx: AdmissionContext, req: AdmissionRequest): void {
  refuseEscalation(ctx, req);
  validatingPolicies(ctx, req);
}

// ---------------------------------------------------------------------------------------------
// RBAC escalation

const RBAC = "rbac.authorization.k8s.io";

function refuseEscalation(ctx: AdmissionContext, req: AdmissionRequest): void {
  if (req.type.group !== RBAC || req.subresource || !req.object) return;
  const kind = req.type.kind;
  const namespace = req.type.namespaced ? req.namespace : undefined;
  const may = (verb: string, resource: string, name?: string) =>
    decide(req.user as User, { verb, group: RBAC, resource, namespace, name }, ctx.policy).allowed;
  const holdsAll = (rules: readonly PolicyRule[], ns: string | undefined) =>
    rules.every((rule) => ruleHeld(req.user as User, rule, ns, ctx.policy));
  if (kind === "Role" || kind === "ClusterRole") {
    const rules = ((req.object as { rules?: PolicyRule[] | null }).rules ?? []) as PolicyRule[];
    if (may("escalate", req.type.plural, req.name) || holdsAll(rules, namespace)) return;
    throw new ApiError(
      403,
      "Forbidden",
      `${req.type.plural}.${RBAC} "${req.name}" is forbidden: user "${req.user.name}" (groups=${JSON.stringify(req.user.groups)}) is attempting to grant RBAC permissions not currently held`,
      { name: req.name, group: RBAC, kind: req.type.plural },
    );
  }
  if (kind === "RoleBinding" || kind === "ClusterRoleBinding") {
    const ref = (req.object as { roleRef?: { kind?: string; name?: string } }).roleRef ?? {};
    const roleResource = ref.kind === "ClusterRole" ? "clusterroles" : "roles";
    if (may("bind", roleResource, ref.name)) return;
    const rules = rulesOfRole(ctx.policy(), ref.kind ?? "", ref.name ?? "", namespace);
    if (rules !== undefined && holdsAll(rules, namespace)) return;
    throw new ApiError(
      403,
      "Forbidden",
      `${req.type.plural}.${RBAC} "${req.name}" is forbidden: user "${req.user.name}" (groups=${JSON.stringify(req.user.groups)}) is attempting to grant RBAC permissions not currently held`,
      { name: req.name, group: RBAC, kind: req.type.plural },
    );
  }
}

/** The rules a role holds (with what it aggregates), or undefined when it does not exist. */
function rulesOfRole(
  policy: Policy,
  kind: string,
  name: string,
  ns: string | undefined,
): PolicyRule[] | undefined {
  if (kind === "Role") {
    const r = policy.roles.find((o) => o.metadata.name === name && o.metadata.namespace === ns);
    return r ? (((r as { rules?: PolicyRule[] | null }).rules ?? []) as PolicyRule[]) : undefined;
  }
  const all = [...bootstrap.clusterRoles, ...policy.clusterRoles] as (KObject & {
    rules?: PolicyRule[] | null;
    aggregationRule?: { clusterRoleSelectors?: { matchLabels?: Record<string, string> }[] | null } | null;
  })[];
  const r = all.find((o) => o.metadata.name === name);
  if (!r) return undefined;
  const selectors = r.aggregationRule?.clusterRoleSelectors ?? [];
  const aggregated = all
    .filter(
      (o) =>
        o !== r &&
        selectors.some((sel) =>
          Object.entries(sel.matchLabels ?? {}).every(([k, v]) => o.metadata.labels?.[k] === v),
        ),
    )
    .flatMap((o) => o.rules ?? []);
  return [...(r.rules ?? []), ...aggregated];
}

/** Whether the user holds everything one rule grants (in `ns`, or cluster-wide). */
function ruleHeld(user: User, rule: PolicyRule, ns: string | undefined, policy: () => Policy): boolean {
  if (rule.nonResourceURLs?.length)
    return rule.nonResourceURLs.every((path) =>
      rule.verbs.every((verb) => decide(user, { verb, path }, policy).allowed),
    );
  const names = rule.resourceNames?.length ? rule.resourceNames : [undefined];
  for (const verb of rule.verbs)
    for (const group of rule.apiGroups ?? [])
      for (const res of rule.resources ?? []) {
        const [resource, subresource] = res.split("/") as [string, string | undefined];
        for (const name of names)
          if (
            !decide(
              user,
              { verb, group, resource, ...(subresource ? { subresource } : {}), namespace: ns, name },
              policy,
            ).allowed
          )
            return false;
      }
  return true;
}

// ---------------------------------------------------------------------------------------------
// ValidatingAdmissionPolicy

interface NamedRule {
  apiGroups?: string[];
  apiVersions?: string[];
  operations?: string[];
  resources?: string[];
  scope?: string;
}

interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: string; values?: string[] }[];
}

interface MatchResources {
  resourceRules?: NamedRule[];
  excludeResourceRules?: NamedRule[];
  namespaceSelector?: LabelSelector;
  objectSelector?: LabelSelector;
}

interface PolicySpec {
  failurePolicy?: "Fail" | "Ignore";
  matchConstraints?: MatchResources;
  matchConditions?: { name: string; expression: string }[];
  variables?: { name: string; expression: string }[];
  validations?: { expression: string; message?: string; messageExpression?: string; reason?: string }[];
}

const has = (list: readonly string[] | undefined, v: string) =>
  !!list && (list.includes("*") || list.includes(v));

function ruleMatches(rule: NamedRule, req: AdmissionRequest): boolean {
  if (!has(rule.apiGroups, req.type.group) || !has(rule.apiVersions, req.type.version)) return false;
  if (!has(rule.operations, req.operation)) return false;
  if (rule.scope === "Cluster" && req.type.namespaced) return false;
  if (rule.scope === "Namespaced" && !req.type.namespaced) return false;
  const resources = rule.resources ?? [];
  const wanted = req.subresource ? `${req.type.plural}/${req.subresource}` : req.type.plural;
  if (!req.subresource) return resources.includes("*") || resources.includes(wanted);
  return (
    resources.includes("*/*") ||
    resources.includes(wanted) ||
    resources.includes(`${req.type.plural}/*`) ||
    resources.includes(`*/${req.subresource}`)
  );
}

function selects(sel: LabelSelector | undefined, labels: Record<string, string> | undefined): boolean {
  if (!sel) return true;
  const l = labels ?? {};
  for (const [k, v] of Object.entries(sel.matchLabels ?? {})) if (l[k] !== v) return false;
  for (const e of sel.matchExpressions ?? []) {
    const present = e.key in l;
    const ok =
      e.operator === "In"
        ? present && (e.values ?? []).includes(l[e.key] as string)
        : e.operator === "NotIn"
          ? !present || !(e.values ?? []).includes(l[e.key] as string)
          : e.operator === "Exists"
            ? present
            : e.operator === "DoesNotExist"
              ? !present
              : false;
    if (!ok) return false;
  }
  return true;
}

function resourcesMatch(
  m: MatchResources | undefined,
  req: AdmissionRequest,
  ns: KObject | undefined,
): boolean {
  if (!m) return true;
  if (m.resourceRules && !m.resourceRules.some((r) => ruleMatches(r, req))) return false;
  if ((m.excludeResourceRules ?? []).some((r) => ruleMatches(r, req))) return false;
  // A cluster-scoped object (a Namespace aside) is selected by any namespaceSelector.
  if (req.type.namespaced && !selects(m.namespaceSelector, ns?.metadata.labels)) return false;
  const obj = req.object ?? req.oldObject;
  return selects(m.objectSelector, obj?.metadata.labels);
}

/** JSON as CEL sees it: objects are maps, integral numbers ints (as Kubernetes' int64 fields). */
function cel(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(cel);
  if (v !== null && typeof v === "object")
    return new Map(Object.entries(v as Record<string, unknown>).map(([k, x]) => [k, cel(x)]));
  if (typeof v === "number" && Number.isInteger(v)) return BigInt(v);
  return v;
}

const STATUS_CODES: Record<string, number> = {
  Unauthorized: 401,
  Forbidden: 403,
  Invalid: 422,
  RequestEntityTooLarge: 413,
};

function validatingPolicies(ctx: AdmissionContext, req: AdmissionRequest): void {
  const { policies, bindings } = ctx.policies();
  if (bindings.length === 0) return;
  const ns = req.type.namespaced && req.namespace ? ctx.namespace(req.namespace) : undefined;
  const request = {
    operation: req.operation,
    userInfo: { username: req.user.name, groups: req.user.groups },
    namespace: req.namespace ?? "",
    name: req.name,
    kind: { group: req.type.group, version: req.type.version, kind: req.type.kind },
    resource: { group: req.type.group, version: req.type.version, resource: req.type.plural },
    subResource: req.subresource ?? "",
    dryRun: req.dryRun,
  };
  const base: Record<string, unknown> = {
    object: cel(req.object),
    oldObject: cel(req.oldObject),
    request: cel(request),
    params: null,
    namespaceObject: cel(ns ?? null),
  };
  for (const binding of bindings) {
    const spec = (binding.spec ?? {}) as {
      policyName?: string;
      validationActions?: string[];
      matchResources?: MatchResources;
    };
    const policy = policies.find((p) => p.metadata.name === spec.policyName);
    if (!policy || !(spec.validationActions ?? []).includes("Deny")) continue;
    const p = (policy.spec ?? {}) as PolicySpec;
    if (!resourcesMatch(p.matchConstraints, req, ns) || !resourcesMatch(spec.matchResources, req, ns))
      continue;
    const deny = (code: number, reason: string, message: string) => {
      throw new ApiError(
        code,
        reason,
        `ValidatingAdmissionPolicy '${policy.metadata.name}' with binding '${binding.metadata.name}' denied request: ${message}`,
      );
    };
    /** An expression that failed: the request is refused, or (failurePolicy Ignore) the policy skipped. */
    const failed = (expression: string, err: unknown): true => {
      if (p.failurePolicy !== "Ignore")
        deny(
          422,
          "Invalid",
          `expression '${expression}' resulted in error: ${String((err as { message?: string }).message ?? err)}`,
        );
      return true;
    };
    const vars = new Map<string, unknown>();
    const evaluate = (expression: string): unknown =>
      run(expression, { ...base, variables: vars } as never, { funcs: strings });
    let skip = false;
    for (const c of p.matchConditions ?? []) {
      const r = evaluate(c.expression);
      skip = isCelError(r) ? failed(c.expression, r) : r !== true;
      if (skip) break;
    }
    for (const v of skip ? [] : (p.variables ?? [])) {
      const r = evaluate(v.expression);
      if (isCelError(r)) {
        skip = failed(v.expression, r);
        break;
      }
      vars.set(v.name, r);
    }
    if (skip) continue;
    for (const v of p.validations ?? []) {
      const r = evaluate(v.expression);
      if (isCelError(r)) {
        failed(v.expression, r);
        break;
      }
      if (r === true) continue;
      let message = v.message ?? `failed expression: ${v.expression}`;
      if (v.messageExpression) {
        const m = evaluate(v.messageExpression);
        if (typeof m === "string" && m.trim() !== "" && !m.includes("\n")) message = m;
      }
      const reason = v.reason ?? "Invalid";
      deny(STATUS_CODES[reason] ?? 422, reason, message);
    }
  }
}
