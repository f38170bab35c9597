/** status.inventory of a Kustomization: one entry per applied object (pure). */
export interface InventoryEntry {
  /** `<namespace>_<name>_<group>_<kind>`, namespace and group empty when there is none. */
  id: string;
  /** The API version the object was applied at. */
  v: string;
}

export interface ObjectRef {
  namespace: string;
  name: string;
  group: string;
  version: string;
  kind: string;
}

export function splitApiVersion(apiVersion: string): { group: string; version: string } {
  const i = apiVersion.indexOf("/");
  return i < 0
    ? { group: "", version: apiVersion }
    : { group: apiVersion.slice(0, i), version: apiVersion.slice(i + 1) };
}

export function entryOf(ref: ObjectRef): InventoryEntry {
  return { id: `${ref.namespace}_${ref.name}_${ref.group}_${ref.kind}`, v: ref.version };
}

export function refOf(entry: InventoryEntry): ObjectRef {
  // Names and namespaces hold no "_" (DNS labels/subdomains), and kinds none either.
  const [namespace = "", name = "", group = "", kind = ""] = entry.id.split("_");
  return { namespace, name, group, kind, version: entry.v };
}

export function apiVersionOf(ref: ObjectRef): string {
  return ref.group ? `${ref.group}/${ref.version}` : ref.version;
}

/** Entries of `before` that `after` no longer holds: what a prune deletes. */
export function staleEntries(before: InventoryEntry[], after: InventoryEntry[]): InventoryEntry[] {
  const keep = new Set(after.map((e) => e.id));
  return before.filter((e) => !keep.has(e.id));
}

/** fluxcd/pkg/ssa ReconcileOrder: the kinds applied first, in this order, and last. */
const FIRST = [
  "CustomResourceDefinition",
  "Namespace",
  "ClusterRole",
  "ClusterClass",
  "RuntimeClass",
  "PriorityClass",
  "StorageClass",
  "VolumeSnapshotClass",
  "IngressClass",
  "GatewayClass",
  "ClusterRoleBinding",
  "ResourceQuota",
  "ServiceAccount",
  "Role",
  "RoleBinding",
  "ConfigMap",
  "Secret",
  "Service",
  "LimitRange",
  "Deployment",
  "StatefulSet",
  "CronJob",
  "PodDisruptionBudget",
];
const LAST = ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"];

function kindIndex(kind: string): number {
  const first = FIRST.indexOf(kind);
  if (first >= 0) return first - FIRST.length;
  const last = LAST.indexOf(kind);
  return last >= 0 ? 1 + last : 0;
}

/**
 * ssa ApplyAllStaged's stages: cluster definitions (CustomResourceDefinition, Namespace,
 * ClusterRole), then every kind named *Class, then the rest.
 */
export function applyStage(kind: string): number {
  if (kind === "CustomResourceDefinition" || kind === "Namespace" || kind === "ClusterRole") return 0;
  return kind.endsWith("Class") ? 1 : 2;
}

type Sortable = Pick<ObjectRef, "namespace" | "name" | "group" | "kind">;

/**
 * The order kustomize-controller applies objects in, and so lists them in status.inventory: by
 * stage, then ssa's SortableUnstructureds (kind order, group, kind, namespace, name).
 */
export function compareApplyOrder(a: Sortable, b: Sortable): number {
  const cmp = (x: string, y: string) => (x < y ? -1 : x > y ? 1 : 0);
  return (
    applyStage(a.kind) - applyStage(b.kind) ||
    (a.group === b.group && a.kind === b.kind ? 0 : kindIndex(a.kind) - kindIndex(b.kind)) ||
    cmp(a.group, b.group) ||
    cmp(a.kind, b.kind) ||
    cmp(a.namespace, b.namespace) ||
    cmp(a.name, b.name)
  );
}

export function sortEntries(entries: InventoryEntry[]): InventoryEntry[] {
  return [...entries].sort((a, b) => compareApplyOrder(refOf(a), refOf(b)));
}
