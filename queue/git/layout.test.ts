import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { objectPath, objectYaml } from "./layout.js";

describe("layout of objects in a folder", () => {
  it("derives the path from group, kind, namespace and name", () => {
    expect(
      objectPath("apps/prod", { apiVersion: "apps/v1", kind: "Deployment", namespace: "web", name: "api" }),
    ).toBe("apps/prod/apps/deployment/web/api.yaml");
    expect(objectPath(".", { apiVersion: "v1", kind: "Namespace", name: "web" })).toBe(
      "core/namespace/_cluster/web.yaml",
    );
    expect(
      objectPath("f", { apiVersion: "apps/v1beta1", kind: "Deployment", namespace: "web", name: "api" }),
    ).toBe(objectPath("f", { apiVersion: "apps/v1", kind: "Deployment", namespace: "web", name: "api" }));
    expect(() =>
      objectPath("f", { apiVersion: "v1", kind: "ConfigMap", namespace: "..", name: "x" }),
    ).toThrow();
  });

  it("strips status and server-populated metadata, and writes the same bytes for the same object", () => {
    const a = {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: {
        name: "c",
        namespace: "n",
        uid: "u",
        resourceVersion: "9",
        managedFields: [{}],
        annotations: { "kubectl.kubernetes.io/last-applied-configuration": "{}", keep: "yes" },
      },
      data: { b: "2", a: "1" },
      status: { x: 1 },
    };
    const b = {
      data: { a: "1", b: "2" },
      kind: "ConfigMap",
      apiVersion: "v1",
      metadata: { namespace: "n", name: "c", annotations: { keep: "yes" } },
    };
    expect(objectYaml(a)).toBe(objectYaml(b));
    expect(parse(objectYaml(a))).toEqual({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { annotations: { keep: "yes" }, name: "c", namespace: "n" },
      data: { a: "1", b: "2" },
    });
    expect(objectYaml(a).startsWith("apiVersion: v1\nkind: ConfigMap\nmetadata:")).toBe(true);
  });
});
