import { describe, expect, it } from "vitest";
import { controllerOnlyFields, deleteDotted, sanitize } from "./sanitize.js";

const t = "2026-03-01T10:00:00Z";

/** A Deployment as the API server returns it (shapes as a real server writes them). */
function deployment() {
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: {
      name: "web",
      namespace: "team",
      uid: "8f0c",
      resourceVersion: "412",
      generation: 3,
      creationTimestamp: t,
      selfLink: "/apis/apps/v1/namespaces/team/deployments/web",
      labels: {
        app: "web",
        "kustomize.toolkit.fluxcd.io/name": "apps",
        "kustomize.toolkit.fluxcd.io/namespace": "flux-system",
      },
      annotations: {
        "kubectl.kubernetes.io/last-applied-configuration": "{}",
        "deployment.kubernetes.io/revision": "2",
        note: "kept",
      },
      managedFields: [
        {
          manager: "kubectl-client-side-apply",
          operation: "Update",
          time: t,
          fieldsType: "FieldsV1",
          fieldsV1: {
            "f:metadata": { "f:labels": { ".": {}, "f:app": {} }, "f:annotations": { "f:note": {} } },
            "f:spec": {
              "f:template": { "f:spec": { "f:containers": { 'k:{"name":"app"}': { "f:image": {} } } } },
            },
          },
        },
        {
          manager: "kube-controller-manager",
          operation: "Update",
          subresource: "scale",
          time: t,
          fieldsType: "FieldsV1",
          fieldsV1: { "f:spec": { "f:replicas": {} } },
        },
        {
          manager: "kube-controller-manager",
          operation: "Update",
          subresource: "status",
          time: t,
          fieldsType: "FieldsV1",
          fieldsV1: { "f:status": { "f:replicas": {} } },
        },
      ],
    },
    spec: { replicas: 7, template: { spec: { containers: [{ name: "app", image: "web:2" }] } } },
    status: { replicas: 7 },
  };
}

describe("sanitize", () => {
  it("drops status, server bookkeeping, the last-applied copy and the appliers' stamps; keeps the rest", () => {
    const r = sanitize(deployment());
    expect(r.ok).toBe(true);
    const o = r.ok ? r.object : {};
    expect(o).toEqual({
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "web", namespace: "team", labels: { app: "web" }, annotations: { note: "kept" } },
      spec: { template: { spec: { containers: [{ name: "app", image: "web:2" }] } } },
    });
  });

  it("leaves out spec.replicas the HorizontalPodAutoscaler alone owns, and keeps it once a person's tool owns it too", () => {
    const left = sanitize(deployment());
    expect(left.ok && (left.object.spec as { replicas?: number }).replicas).toBeUndefined();
    const d = deployment();
    d.metadata.managedFields.push({
      manager: "kubectl",
      operation: "Update",
      subresource: "scale",
      time: t,
      fieldsType: "FieldsV1",
      fieldsV1: { "f:spec": { "f:replicas": {} } },
    });
    const r = sanitize(d);
    expect(r.ok && (r.object.spec as { replicas?: number }).replicas).toBe(7);
  });

  it("a custom list of controller managers replaces the default", () => {
    const r = sanitize(deployment(), { controllerManagers: [] });
    expect(r.ok && (r.object.spec as { replicas?: number }).replicas).toBe(7);
  });

  it("never mirrors an object with a controller ownerReference; a plain ownerReference is dropped", () => {
    const pod = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "p", ownerReferences: [{ kind: "ReplicaSet", name: "web-1", controller: true }] },
    };
    expect(sanitize(pod)).toMatchObject({ ok: false, reason: "controlled" });
    const cm = {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "c", ownerReferences: [{ kind: "X", name: "y" }] },
    };
    expect(sanitize(cm)).toEqual({
      ok: true,
      object: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c" } },
    });
  });

  it("refuses a Secret", () => {
    expect(
      sanitize({ apiVersion: "v1", kind: "Secret", metadata: { name: "s" }, data: { a: "eA==" } }),
    ).toMatchObject({
      ok: false,
      reason: "secret",
    });
  });

  it("leaves out the rule's excluded fields, keys with dots included", () => {
    const cm = {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "c", labels: { "app.kubernetes.io/name": "x", keep: "y" } },
      data: { cache: "big", "a.b": "1", keep: "2" },
    };
    const r = sanitize(cm, {
      excludeFields: ["data.cache", "data.a.b", "metadata.labels.app.kubernetes.io/name", "no.such"],
    });
    expect(r).toEqual({
      ok: true,
      object: {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "c", labels: { keep: "y" } },
        data: { keep: "2" },
      },
    });
  });

  it("does not change its input", () => {
    const d = deployment();
    const before = JSON.stringify(d);
    sanitize(d);
    expect(JSON.stringify(d)).toBe(before);
  });
});

describe("controllerOnlyFields", () => {
  it("a leaf is left out only when no other entry owns it, above it or below it", () => {
    const hpa = { manager: "hpa", fieldsV1: { "f:spec": { "f:replicas": {}, "f:paused": {} } } };
    expect(controllerOnlyFields([hpa], ["hpa"])).toEqual([
      ["spec", "replicas"],
      ["spec", "paused"],
    ]);
    const user = { manager: "kubectl", fieldsV1: { "f:spec": { "f:paused": {} } } };
    expect(controllerOnlyFields([hpa, user], ["hpa"])).toEqual([["spec", "replicas"]]);
    const whole = { manager: "kubectl", fieldsV1: { "f:spec": {} } };
    expect(controllerOnlyFields([hpa, whole], ["hpa"])).toEqual([]);
  });

  it("a keyed list item ends the path at its list", () => {
    const c = {
      manager: "ctl",
      fieldsV1: { "f:spec": { "f:containers": { 'k:{"name":"a"}': { "f:image": {} } } } },
    };
    expect(controllerOnlyFields([c], ["ctl"])).toEqual([["spec", "containers"]]);
  });
});

describe("deleteDotted", () => {
  it("takes the longest key at each level and ignores paths that are not there", () => {
    const o = { a: { "b.c": { d: 1, e: 2 }, b: { c: 3 } } };
    deleteDotted(o, "a.b.c.d");
    expect(o).toEqual({ a: { "b.c": { e: 2 }, b: { c: 3 } } });
    deleteDotted(o, "x.y");
    expect(o).toEqual({ a: { "b.c": { e: 2 }, b: { c: 3 } } });
  });
});
