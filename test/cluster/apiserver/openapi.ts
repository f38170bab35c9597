/**
 * The sliver of OpenAPI v3 kubectl needs: the root index and, per group/version, the PATCH
 * operations with their `fieldValidation` parameter (kubectl reads these to learn that the server
 * validates fields itself; without them it tries to download OpenAPI v2 for client-side
 * validation and refuses to apply), and one schema per kind for `kubectl explain`: a custom
 * resource's from its CRD, a built-in kind's only its envelope (apiVersion, kind, metadata).
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
  metadata: { type: "object", description: "Standard object's metadata." },
};

/** The schema `kubectl explain` reads for one kind, tagged with its group/version/kind. */
function schemaOf(t: ResourceType): SchemaNode {
  const own = t.schema ?? {
    type: "object",
    description: `${t.kind} (a built-in kind: the simulated API server keeps no schema for its fields).`,
  };
  return {
    ...own,
    type: "object",
    properties: { ...envelope, ...(own.properties ?? {}) },
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
  const schemas: Record<string, SchemaNode> = {};
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
