/**
 * What of a live object is written to Git (pure). Git holds what a person declared, never what
 * the cluster keeps about it: no status, no server bookkeeping in metadata, no applier's stamps,
 * no last-applied copy, and no field that only a controller which is not a person's tool owns
 * (the classic: `spec.replicas` written by the HorizontalPodAutoscaler through the scale
 * subresource, so Git keeps the HPA's spec and not the live replica count). Objects a controller
 * owns (a ReplicaSet, a Pod, a CronJob's Job) are never mirrored, and a Secret is refused: Git
 * never receives one in clear text. A field no field manager owns was set by the API server (a
 * default, an admission plugin, the scheduler) and is left out too, where managedFields tell it
 * apart (`serverSetFields`).
 */
import { SECRET_IN_CLEAR_TEXT } from "../../queue/scope.js";
import { ARGOCD_TRACKING_ANNOTATION, FLUX_NAME_LABEL, FLUX_NAMESPACE_LABEL } from "./ownership.js";

/** Field managers of controllers that are not a person's tool: a field only they own is left out. */
export const DEFAULT_CONTROLLER_MANAGERS: readonly string[] = [
  "kube-controller-manager",
  "horizontal-pod-autoscaler",
  "vpa-updater",
  "vpa-recommender",
  "cluster-autoscaler",
  "keda-operator",
];

const METADATA_DROPPED = [
  "managedFields",
  "resourceVersion",
  "uid",
  "generation",
  "creationTimestamp",
  "selfLink",
  "deletionTimestamp",
  "deletionGracePeriodSeconds",
  "ownerReferences",
] as const;

const ANNOTATIONS_DROPPED = [
  "kubectl.kubernetes.io/last-applied-configuration",
  "deployment.kubernetes.io/revision",
  ARGOCD_TRACKING_ANNOTATION,
];
const LABELS_DROPPED = [FLUX_NAME_LABEL, FLUX_NAMESPACE_LABEL];

export interface SanitizeOptions {
  /** Dotted paths the WatchRule leaves out (`spec.excludeFields`). */
  excludeFields?: readonly string[];
  /** Managers whose fields alone are left out; DEFAULT_CONTROLLER_MANAGERS when omitted. */
  controllerManagers?: readonly string[];
}

export type Sanitized =
  | { ok: true; object: Record<string, unknown> }
  /** `controlled`: a controller owns the object. `secret`: Secrets are refused. */
  | { ok: false; reason: "controlled" | "secret"; message: string };

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === "object" && !Array.isArray(v);

interface OwnerReference {
  kind?: string;
  name?: string;
  controller?: boolean;
}

export function isSecret(obj: { apiVersion?: unknown; kind?: unknown }): boolean {
  return obj.apiVersion === "v1" && obj.kind === "Secret";
}

/** The controller ownerReference of an object, if any. */
export function controllerOf(obj: Obj): OwnerReference | undefined {
  const meta = isObj(obj.metadata) ? obj.metadata : {};
  const refs = Array.isArray(meta.ownerReferences) ? (meta.ownerReferences as OwnerReference[]) : [];
  return refs.find((r) => r.controller === true);
}

export function sanitize(raw: Obj, opts: SanitizeOptions = {}): Sanitized {
  if (isSecret(raw)) return { ok: false, reason: "secret", message: SECRET_IN_CLEAR_TEXT };
  const controller = controllerOf(raw);
  if (controller)
    return {
      ok: false,
      reason: "controlled",
      message: `owned by its controller ${controller.kind ?? "?"} ${controller.name ?? "?"}`,
    };
  const obj = structuredClone(raw);
  delete obj.status;
  const meta = isObj(obj.metadata) ? obj.metadata : {};
  const managed = Array.isArray(meta.managedFields) ? (meta.managedFields as ManagedEntry[]) : [];
  for (const k of METADATA_DROPPED) delete meta[k];
  dropKeys(meta, "annotations", ANNOTATIONS_DROPPED);
  dropKeys(meta, "labels", LABELS_DROPPED);
  for (const path of serverSetFields(obj, managed)) deleteSegments(obj, path);
  for (const path of controllerOnlyFields(managed, opts.controllerManagers ?? DEFAULT_CONTROLLER_MANAGERS))
    deleteSegments(obj, path);
  for (const dotted of opts.excludeFields ?? []) deleteDotted(obj, dotted);
  return { ok: true, object: obj };
}

function dropKeys(meta: Obj, field: "annotations" | "labels", keys: readonly string[]): void {
  const map = meta[field];
  if (!isObj(map)) return;
  for (const k of keys) delete map[k];
  if (Object.keys(map).length === 0) delete meta[field];
}

interface ManagedEntry {
  manager?: string;
  subresource?: string;
  fieldsV1?: unknown;
}

/**
 * Paths of the leaves (map fields only: `f:` keys) each entry owns. A keyed list item (`k:`,
 * `v:`, `i:`) ends the path at its list: whole lists are judged, never single items.
 */
function ownedPaths(fields: unknown, prefix: string[] = []): string[][] {
  if (!isObj(fields)) return [];
  const out: string[][] = [];
  let leaf = true;
  for (const [k, v] of Object.entries(fields)) {
    if (k === ".") continue;
    if (!k.startsWith("f:")) return [prefix];
    leaf = false;
    out.push(...ownedPaths(v, [...prefix, k.slice(2)]));
  }
  return leaf ? [prefix] : out;
}

const startsWith = (a: string[], b: string[]) => b.length <= a.length && b.every((s, i) => a[i] === s);

/**
 * Fields owned only by controller managers: a leaf a controller's entry owns that no other entry
 * owns, nor any field above or below it. Status entries never count (status is dropped).
 */
export function controllerOnlyFields(
  entries: readonly ManagedEntry[],
  controllers: readonly string[],
): string[][] {
  const isController = (e: ManagedEntry) => e.manager !== undefined && controllers.includes(e.manager);
  const counted = entries.filter((e) => e.subresource !== "status");
  const theirs = counted.filter(isController).flatMap((e) => ownedPaths(e.fieldsV1));
  const others = counted.filter((e) => !isController(e)).flatMap((e) => ownedPaths(e.fieldsV1));
  return theirs.filter(
    (p) => p.length > 0 && p[0] !== "status" && !others.some((o) => startsWith(o, p) || startsWith(p, o)),
  );
}

/** Top-level fields never judged by ownership: the object's identity, and metadata (its own rules). */
const NOT_JUDGED = new Set(["apiVersion", "kind", "metadata", "status"]);

/**
 * Fields of `obj` (outside apiVersion, kind, metadata and status) that no managedFields entry owns,
 * at or above or below them: the API server set them (a default such as a Service's `clusterIP`,
 * an admission plugin's `tolerations`, the scheduler's `nodeName`), nobody wrote them. A keyed list
 * is judged whole, as its entries are (an owned list keeps every item and every field of them).
 *
 * Only where they can be told apart: an object with no managedFields, or none outside status, keeps
 * everything. And a client-side write (operation `Update`: `kubectl create`, `kubectl edit`, a
 * controller's update) owns every field of the object it sent *after* defaulting, so the defaults
 * of an object created that way are its creator's and are kept; a server-side apply owns only what
 * it sent, so the defaults around it are dropped.
 */
export function serverSetFields(obj: Obj, entries: readonly ManagedEntry[]): string[][] {
  const owned = entries
    .filter((e) => e.subresource !== "status")
    .flatMap((e) => ownedPaths(e.fieldsV1))
    .filter((p) => p.length > 0);
  if (owned.length === 0) return [];
  const out: string[][] = [];
  const walk = (value: Obj, path: string[]) => {
    for (const [k, v] of Object.entries(value)) {
      const at = [...path, k];
      if (path.length === 0 && NOT_JUDGED.has(k)) continue;
      if (owned.some((o) => startsWith(at, o))) continue; // owned here or above: kept whole
      if (isObj(v) && owned.some((o) => startsWith(o, at)))
        walk(v, at); // owned below: judge inside
      else out.push(at);
    }
  };
  walk(obj, []);
  return out;
}

function deleteSegments(obj: Obj, path: string[]): void {
  let at: unknown = obj;
  for (const s of path.slice(0, -1)) {
    if (!isObj(at)) return;
    at = at[s];
  }
  if (isObj(at)) delete at[path[path.length - 1] as string];
}

/**
 * Deletes a dotted path whose keys may hold dots themselves (`metadata.labels.app.kubernetes.io/name`):
 * at each level the longest key the path starts with is taken.
 */
export function deleteDotted(obj: Obj, dotted: string): void {
  const segs = dotted.split(".");
  const walk = (at: unknown, rest: string[]): void => {
    if (!isObj(at) || rest.length === 0) return;
    for (let n = rest.length; n >= 1; n--) {
      const key = rest.slice(0, n).join(".");
      if (!(key in at)) continue;
      if (n === rest.length) delete at[key];
      else walk(at[key], rest.slice(n));
      return;
    }
  };
  walk(obj, segs);
}
