/**
 * Reading structural schemas: which child schema applies where, how a list merges, and the
 * unknown-field check that `fieldValidation` uses (Strict refuses, Warn/Ignore prune).
 * Pure functions, no I/O.
 */
import type { SchemaNode } from "./types.js";

/** metadata is the same for every kind, whatever a CRD's schema says about it. */
export const metadataSchema: SchemaNode = {
  type: "object",
  "x-kubernetes-preserve-unknown-fields": true,
  properties: {
    labels: { type: "object", additionalProperties: { type: "string" } },
    annotations: { type: "object", additionalProperties: { type: "string" } },
    finalizers: { type: "array", items: { type: "string" }, "x-kubernetes-list-type": "set" },
    ownerReferences: {
      type: "array",
      "x-kubernetes-list-type": "map",
      "x-kubernetes-list-map-keys": ["uid"],
      items: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
    },
  },
};

/** Loose schema for kinds we serve without one: everything is kept, lists are atomic. */
export const openSchema: SchemaNode = { type: "object", "x-kubernetes-preserve-unknown-fields": true };

export function childSchema(
  node: SchemaNode | undefined,
  name: string,
  atRoot = false,
): SchemaNode | undefined {
  if (atRoot && name === "metadata") return metadataSchema;
  if (!node) return undefined;
  const prop = node.properties?.[name];
  if (prop) return prop;
  if (typeof node.additionalProperties === "object") return node.additionalProperties;
  return undefined;
}

export function itemSchema(node: SchemaNode | undefined): SchemaNode | undefined {
  return node?.items;
}

/**
 * How a list merges. A map list's key fields may have schema defaults (a container port's
 * `protocol: TCP`): an item that leaves one out is keyed by the default, as structured-merge-diff
 * keys it (`k:{"containerPort":80,"protocol":"TCP"}` for an applied `{containerPort: 80}`).
 */
export type ListKind =
  | { type: "atomic" }
  | { type: "set" }
  | { type: "map"; keys: string[]; keyDefaults: Record<string, unknown> };

export function listKind(node: SchemaNode | undefined): ListKind {
  const t = node?.["x-kubernetes-list-type"];
  if (t === "set") return { type: "set" };
  if (t === "map") {
    const keys = node?.["x-kubernetes-list-map-keys"] ?? ["name"];
    const keyDefaults: Record<string, unknown> = {};
    for (const k of keys) {
      const d = node?.items?.properties?.[k]?.default;
      if (d !== undefined) keyDefaults[k] = d;
    }
    return { type: "map", keys, keyDefaults };
  }
  return { type: "atomic" };
}

export function isAtomicMap(node: SchemaNode | undefined): boolean {
  return node?.["x-kubernetes-map-type"] === "atomic";
}

/** A schema node that declares which fields exist (so others are unknown). */
function closedObject(node: SchemaNode): boolean {
  if (node["x-kubernetes-preserve-unknown-fields"]) return false;
  if (node["x-kubernetes-embedded-resource"]) return false;
  if (node.additionalProperties !== undefined && node.additionalProperties !== false) return false;
  return node.type === "object" || node.properties !== undefined;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * Finds fields the schema does not declare. With `prune`, removes them from `value` in place (what
 * the real server does for custom resources under fieldValidation Ignore/Warn).
 * Returns the dotted paths of the unknown fields, e.g. `.spec.syncPolicy.automated.enabled`.
 */
export function unknownFields(value: unknown, schema: SchemaNode | undefined, prune: boolean): string[] {
  const found: string[] = [];
  const walk = (v: unknown, node: SchemaNode | undefined, path: string, atRoot: boolean) => {
    if (!node) return;
    if (isPlainObject(v)) {
      for (const key of Object.keys(v)) {
        if (atRoot && (key === "apiVersion" || key === "kind")) continue;
        if (atRoot && key === "metadata") continue; // metadata is validated by the server, not the CRD
        const child = childSchema(node, key);
        if (!child) {
          if (closedObject(node)) {
            found.push(`${path}.${key}`);
            if (prune) delete v[key];
          }
          continue;
        }
        walk(v[key], child, `${path}.${key}`, false);
      }
    } else if (Array.isArray(v)) {
      v.forEach((item, i) => {
        walk(item, node.items, `${path}[${i}]`, false);
      });
    }
  };
  walk(value, schema, "", true);
  return found;
}
