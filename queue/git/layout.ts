/**
 * Where an object lives in a GitTarget's folder and what its file holds. One object is one YAML
 * file at `<folder>/<group>/<kind>/<namespace>/<name>.yaml`, with `core` for the empty API group
 * and `_cluster` for cluster-scoped objects (no namespace can start with `_`). The API version is
 * left out of the path on purpose: a new version of a kind must not move its files.
 * docs/design/git-layout.md describes the layout.
 */
import { stringify } from "yaml";
import type { ObjectRef } from "../contract.js";

export const CORE_GROUP_DIR = "core";
export const CLUSTER_SCOPE_DIR = "_cluster";

/** Metadata the API server fills in: never written to Git. */
const SERVER_METADATA = [
  "uid",
  "resourceVersion",
  "generation",
  "creationTimestamp",
  "deletionTimestamp",
  "deletionGracePeriodSeconds",
  "managedFields",
  "selfLink",
  "ownerReferences",
] as const;
const SERVER_ANNOTATIONS = [
  "kubectl.kubernetes.io/last-applied-configuration",
  "deployment.kubernetes.io/revision",
];

export function groupOf(apiVersion: string): string {
  const slash = apiVersion.indexOf("/");
  return slash < 0 ? "" : apiVersion.slice(0, slash);
}

/** Rejects names that would escape the folder or make an unreadable path. */
function segment(value: string, what: string): string {
  if (value === "" || value === "." || value === ".." || value.includes("/") || value.includes("\0"))
    throw new Error(`${what} "${value}" cannot be a path segment`);
  return value;
}

/** Path of an object's file relative to the repository root. */
export function objectPath(folder: string, ref: ObjectRef): string {
  const group = groupOf(ref.apiVersion) || CORE_GROUP_DIR;
  const ns = ref.namespace ? segment(ref.namespace, "namespace") : CLUSTER_SCOPE_DIR;
  const parts = [
    segment(group, "group"),
    segment(ref.kind.toLowerCase(), "kind"),
    ns,
    `${segment(ref.name, "name")}.yaml`,
  ];
  const base = folder === "." || folder === "" ? "" : `${folder.replace(/^\/+|\/+$/g, "")}/`;
  return `${base}${parts.join("/")}`;
}

export function refOf(object: {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
}): ObjectRef {
  const ref: ObjectRef = { apiVersion: object.apiVersion, kind: object.kind, name: object.metadata.name };
  if (object.metadata.namespace) ref.namespace = object.metadata.namespace;
  return ref;
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(value as object).sort())
      out[k] = sortKeys((value as Record<string, unknown>)[k]);
    return out;
  }
  return value;
}

/** The object as stored: status and server-populated metadata removed, keys in a stable order. */
export function cleanObject(object: Record<string, unknown>): Record<string, unknown> {
  const { apiVersion, kind, metadata, status: _status, ...rest } = object;
  const meta = { ...((metadata ?? {}) as Record<string, unknown>) };
  for (const k of SERVER_METADATA) delete meta[k];
  if (meta.annotations && typeof meta.annotations === "object") {
    const ann = { ...(meta.annotations as Record<string, string>) };
    for (const k of SERVER_ANNOTATIONS) delete ann[k];
    if (Object.keys(ann).length === 0) delete meta.annotations;
    else meta.annotations = ann;
  }
  if (meta.labels && typeof meta.labels === "object" && Object.keys(meta.labels).length === 0)
    delete meta.labels;
  return { apiVersion, kind, metadata: sortKeys(meta), ...(sortKeys(rest) as Record<string, unknown>) };
}

/** The file's bytes: the same object always gives the same bytes, so a replay changes nothing. */
export function objectYaml(object: Record<string, unknown>): string {
  return stringify(cleanObject(object), { lineWidth: 0 });
}
