/**
 * The sliver of OpenAPI v3 kubectl needs: the root index and, per group/version, the PATCH
 * operations with their `fieldValidation` parameter (kubectl reads these to learn that the server
 * validates fields itself; without them it tries to download OpenAPI v2 for client-side
 * validation and refuses to apply), and one schema per kind for `kubectl explain`: a custom
 * resource's from its CRD, a built-in kind's envelope (apiVersion, kind, metadata) and, for a
 * ConfigMap, its fields. `metadata` is an ObjectMeta for every kind, a CRD's too, as the real
 * server publishes it.
 */
import type { Registry } from "./registry.js";
import { apiVersionOf, type ResourceType, type SchemaNode } from "./types.js";

const envelope: Record<string, SchemaNode> = {
  apiVersion: {
    type: "string",
    description: "APIVersion defines the versioned schema of this representation of an object.",
  },
  kind: {
    type: "string",
    description: "Kind is a string value representing the REST resource this object represents.",
  },
  metadata: {
    description: "Standard object's metadata.",
    default: {},
    allOf: [{ $ref: "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" }],
  },
};

const str = (description: string): SchemaNode => ({ type: "string", description });
const strMap = (description: string): SchemaNode => ({
  type: "object",
  additionalProperties: { type: "string" },
  description,
});

/** The ObjectMeta every kind's `metadata` refers to (the fields people set and read). */
const OBJECT_META: SchemaNode = {
  type: "object",
  description: "ObjectMeta is metadata that all persisted resources must have.",
  properties: {
    annotations: strMap("Annotations: arbitrary metadata kept with the object, not queryable."),
    creationTimestamp: { ...str("When the object was created, set by the server."), format: "date-time" },
    deletionTimestamp: { ...str("When the object will be deleted, set by the server."), format: "date-time" },
    finalizers: {
      type: "array",
      items: { type: "string" },
      "x-kubernetes-list-type": "set",
      description: "Conditions that must be cleared before the object is deleted.",
    },
    generateName: str("A prefix the server completes into a unique name when no name is given."),
    generation: { type: "integer", format: "int64", description: "The generation of the desired state." },
    labels: strMap("Labels: keys and values to organize and select objects."),
    name: str("Name must be unique within a namespace."),
    namespace: str("The namespace the object is in."),
    resourceVersion: str("The version of the object, for optimistic concurrency and watches."),
    uid: str("The unique identifier of the object, set by the server."),
  },
};

/** Field schemas of built-in kinds for explain (the rest show their envelope only). */
const BUILTIN_FIELDS: Record<string, SchemaNode> = {
  "/v1/ConfigMap": {
    type: "object",
    description: "ConfigMap holds configuration data for pods to consume.",
    properties: {
      binaryData: {
        type: "object",
        additionalProperties: { type: "string", format: "byte" },
        description: "Binary data, by key; its keys must not overlap with those of data.",
      },
      data: {
        type: "object",
        additionalProperties: { type: "string", default: "" },
        description: "Configuration data, by key; a value that is not UTF-8 goes in binaryData.",
      },
      immutable: { type: "boolean", description: "When true, data and binaryData cannot be updated." },
    },
  },
};

/** The schema `kubectl explain` reads for one kind, tagged with its group/version/kind. */
function schemaOf(t: ResourceType): SchemaNode {
  const own = t.schema ??
    BUILTIN_FIELDS[`${t.group}/${t.version}/${t.kind}`] ?? {
      type: "object",
      description: `${t.kind} (a built-in kind: the simulated API server keeps no schema for its fields).`,
    };
  return {
    ...own,
    type: "object",
    properties: { ...envelope, ...(own.properties ?? {}), metadata: envelope.metadata! },
    "x-kubernetes-group-version-kind": [{ group: t.group, version: t.version, kind: t.kind }],
  };
}

const gvPath = (group: string, version: string) =>
  group === "" ? `api/${version}` : `apis/${group}/${version}`;

export function openApiRoot(registry: Registry) {
  const paths: Record<string, { serverRelativeURL: string }> = {};
  for (const t of registry.all()) {
    const p = gvPath(t.group, t.version);
    paths[p] = { serverRelativeURL: `/openapi/v3/${p}?hash=${registry.all().length}` };
  }
  return { paths };
}

export function openApiGroupVersion(registry: Registry, path: string) {
  const served = registry.all().filter((t) => gvPath(t.group, t.version) === path);
  if (served.length === 0) return undefined;
  const paths: Record<string, unknown> = {};
  const schemas: Record<string, SchemaNode> = {
    "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": OBJECT_META,
  };
  const params = ["dryRun", "fieldManager", "fieldValidation", "force"].map((name) => ({
    name,
    in: "query",
    schema: { type: name === "force" ? "boolean" : "string", uniqueItems: true },
  }));
  for (const t of served) {
    const base = `/${path}${t.namespaced ? "/namespaces/{namespace}" : ""}/${t.plural}/{name}`;
    const gvk = { group: t.group, version: t.version, kind: t.kind };
    schemas[`${t.group || "core"}.${t.version}.${t.kind}`] = schemaOf(t);
    paths[base] = {
      patch: {
        "x-kubernetes-action": "patch",
        "x-kubernetes-group-version-kind": gvk,
        parameters: params,
        operationId: `patch${t.kind}`,
      },
      put: {
        "x-kubernetes-action": "put",
        "x-kubernetes-group-version-kind": gvk,
        parameters: params,
        operationId: `replace${t.kind}`,
      },
    };
  }
  return {
    openapi: "3.0.0",
    info: { title: "Kubernetes", version: apiVersionOf(served[0]!) },
    paths,
    components: { schemas },
  };
}
