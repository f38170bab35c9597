/**
 * The sliver of OpenAPI v3 kubectl needs: the root index and, per group/version, the PATCH
 * operations with their `fieldValidation` parameter. kubectl reads these to learn that the server
 * validates fields itself; without them it tries to download OpenAPI v2 for client-side
 * validation and refuses to apply. No schemas are published.
 */
import type { Registry } from "./registry.js";
import { apiVersionOf } from "./types.js";

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
  const params = ["dryRun", "fieldManager", "fieldValidation", "force"].map((name) => ({
    name,
    in: "query",
    schema: { type: name === "force" ? "boolean" : "string", uniqueItems: true },
  }));
  for (const t of served) {
    const base = `/${path}${t.namespaced ? "/namespaces/{namespace}" : ""}/${t.plural}/{name}`;
    const gvk = { group: t.group, version: t.version, kind: t.kind };
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
    components: { schemas: {} },
  };
}
