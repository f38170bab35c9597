/**
 * ScopeGrant: a cluster administrator's grant that lets GitTargets hold more than their own
 * namespace. Without one, a GitTarget in namespace N holds namespaced objects in N only, and never
 * a cluster-scoped or privileged kind. Cluster-scoped, so only whoever may create cluster-scoped
 * applygate objects (a cluster administrator) can widen a target's scope. queue/scope.ts reads it.
 */
import { z } from "zod";
import { ageColumn, type KindInfo, kindObject, namespaceName, objectName } from "./common.js";
import { k8s } from "./k8s-ext.js";

export const SCOPE_GRANT_KIND = "ScopeGrant";
export const SCOPE_GRANT_PLURAL = "scopegrants";

/** An API group and kind; `kind: "*"` means every kind of the group. The core group is "". */
export const kindRef = z
  .object({
    group: z
      .string()
      .max(253)
      .regex(/^(|[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)$/)
      .describe('API group; "" for the core group (ConfigMap, Namespace...).'),
    kind: z
      .string()
      .min(1)
      .max(63)
      .regex(/^(\*|[A-Za-z][A-Za-z0-9]*)$/)
      .describe('Kind as written in objects (ClusterRole), or "*" for every kind of the group.'),
  })
  .describe("A kind of object.");
export type KindRef = z.infer<typeof kindRef>;

export const grantee = z
  .object({
    namespace: namespaceName.describe("Namespace of the GitTargets this grant is for."),
    name: objectName.optional().describe("One GitTarget; every GitTarget of the namespace when omitted."),
  })
  .describe("GitTargets the grant is for.");
export type Grantee = z.infer<typeof grantee>;

export const scopeGrantSpec = z.object({
  targets: z.array(grantee).min(1).describe("The GitTargets (or namespaces of GitTargets) granted."),
  namespaces: k8s(z.array(z.union([z.literal("*"), namespaceName])), { listType: "set" })
    .optional()
    .describe('Namespaces besides the GitTarget\'s own whose namespaced objects it may hold; "*" for all.'),
  kinds: z
    .array(kindRef)
    .optional()
    .describe(
      "Cluster-scoped and privileged kinds it may hold (RBAC, CRDs, admission webhooks, Namespaces, PriorityClasses, applier objects); none without a grant.",
    ),
});
export type ScopeGrantSpec = z.infer<typeof scopeGrantSpec>;

export const scopeGrantStatus = z.object({});

export const scopeGrant = kindObject(SCOPE_GRANT_KIND, scopeGrantSpec, scopeGrantStatus);
export type ScopeGrant = z.infer<typeof scopeGrant>;

export const scopeGrantInfo: KindInfo = {
  kind: SCOPE_GRANT_KIND,
  plural: SCOPE_GRANT_PLURAL,
  singular: "scopegrant",
  shortNames: ["sg"],
  scope: "Cluster",
  description:
    "A cluster administrator's grant: which GitTargets may hold objects in other namespaces, cluster-scoped objects or privileged kinds.",
  spec: scopeGrantSpec,
  status: scopeGrantStatus,
  printerColumns: [ageColumn],
};
