/** Shapes shared by every applygate kind: group, version, names, references, conditions. */
import { z } from "zod";
import { k8s } from "./k8s-ext.js";
import { StatusReason } from "./reasons.js";

export const GROUP = "applygate.dev";
export const VERSION = "v1alpha1";
export const API_VERSION = `${GROUP}/${VERSION}` as const;
export const CATEGORY = "applygate";

/** DNS-1123 subdomain: the name of most namespaced objects (Secrets, Kustomizations, Applications). */
export const objectName = z
  .string()
  .min(1)
  .max(253)
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/);

/** DNS-1123 label: a namespace name. */
export const namespaceName = z
  .string()
  .min(1)
  .max(63)
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);

/** RFC 3339 timestamp as the API server writes it (metav1.Time). */
export const timestamp = k8s(z.string().datetime({ offset: true }), { format: "date-time" });

export const localSecretRef = z
  .object({ name: objectName.describe("Name of a Secret in the same namespace.") })
  .describe("Reference to a Secret in the same namespace.");
export type LocalSecretRef = z.infer<typeof localSecretRef>;

/** A namespace allowed to use a resource from another namespace; "*" allows every namespace. */
export const accessFrom = z
  .object({
    namespaces: k8s(z.array(z.union([z.literal("*"), namespaceName])), { listType: "set" }).describe(
      'Namespaces (besides this object\'s own) whose GitTargets may use it; "*" allows all.',
    ),
  })
  .describe("Cross-namespace grant.");
export type AccessFrom = z.infer<typeof accessFrom>;

/**
 * Whether an object in `ownNamespace` whose `spec.accessFrom` is `from` may be used by a GitTarget
 * in `namespace`: its own namespace always, another only when listed (or "*").
 */
export function admitsNamespace(
  ownNamespace: string,
  from: AccessFrom | undefined,
  namespace: string,
): boolean {
  return ownNamespace === namespace || (from?.namespaces ?? []).some((ns) => ns === "*" || ns === namespace);
}

/** The reason a GitTarget is refused when its GitProvider is in another namespace that does not admit it. */

/** Why a GitTarget may not use the GitProvider it names, or undefined when it may. */
export function providerRefusal(
  target: { namespace: string },
  provider: { namespace: string; name: string; accessFrom?: AccessFrom | undefined },
): { reason: typeof StatusReason.ProviderNamespaceNotAllowed; message: string } | undefined {
  if (admitsNamespace(provider.namespace, provider.accessFrom, target.namespace)) return undefined;
  return {
    reason: StatusReason.ProviderNamespaceNotAllowed,
    message: `GitProvider ${provider.namespace}/${provider.name} does not admit namespace ${target.namespace} (spec.accessFrom.namespaces)`,
  };
}

export const conditionStatus = z.enum(["True", "False", "Unknown"]);
export type ConditionStatus = z.infer<typeof conditionStatus>;

/** metav1.Condition, with the same limits the API server applies to built-in conditions. */
export const condition = z.object({
  type: z
    .string()
    .min(1)
    .max(316)
    .regex(
      /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$/,
    )
    .describe("Condition type in CamelCase, e.g. Ready."),
  status: conditionStatus,
  reason: z
    .string()
    .min(1)
    .max(1024)
    .regex(/^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/)
    .describe("Machine-readable CamelCase reason for the last transition."),
  message: z.string().max(32768).describe("Human-readable detail; may be empty."),
  lastTransitionTime: timestamp,
  observedGeneration: z.number().int().min(0).optional(),
});
export type Condition = z.infer<typeof condition>;

export const conditions = k8s(z.array(condition), { listType: "map", listMapKeys: ["type"] }).describe(
  "Latest observations of the object's state.",
);

export const observedGeneration = z
  .number()
  .int()
  .min(0)
  .describe("The metadata.generation this status was computed from.");

/** Object metadata as applygate reads it; the API server owns its schema, so unknown keys pass. */
export const objectMeta = z
  .object({
    name: objectName,
    namespace: namespaceName.optional(),
    uid: z.string().optional(),
    generation: z.number().int().optional(),
    resourceVersion: z.string().optional(),
    labels: z.record(z.string()).optional(),
    annotations: z.record(z.string()).optional(),
    finalizers: z.array(z.string()).optional(),
    creationTimestamp: z.string().optional(),
    deletionTimestamp: z.string().optional(),
  })
  .passthrough();
export type ObjectMeta = z.infer<typeof objectMeta>;

/** Builds the full object schema of a kind from its spec and status schemas. */
export function kindObject<K extends string, S extends z.ZodTypeAny, T extends z.ZodTypeAny>(
  kind: K,
  spec: S,
  status: T,
) {
  return z.object({
    apiVersion: z.literal(API_VERSION),
    kind: z.literal(kind),
    metadata: objectMeta,
    spec,
    status: status.optional(),
  });
}

/** Static facts about a kind: what the CRD generator and the cluster need besides the schema. */
export interface PrinterColumn {
  name: string;
  type: "string" | "integer" | "number" | "boolean" | "date";
  jsonPath: string;
  description?: string;
  priority?: number;
}

export interface KindInfo {
  kind: string;
  plural: string;
  singular: string;
  shortNames: string[];
  printerColumns: PrinterColumn[];
  spec: z.ZodTypeAny;
  status: z.ZodTypeAny;
  description: string;
  /** Namespaced unless said otherwise. */
  scope?: "Namespaced" | "Cluster";
}

export const readyColumn: PrinterColumn = {
  name: "Ready",
  type: "string",
  jsonPath: '.status.conditions[?(@.type=="Ready")].status',
};
export const ageColumn: PrinterColumn = {
  name: "Age",
  type: "date",
  jsonPath: ".metadata.creationTimestamp",
};
