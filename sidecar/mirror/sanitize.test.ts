import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { controllerOnlyFields, deleteDotted, sanitize, serverSetFields } from "./sanitize.js";

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

describe("server-set fields, on shapes a real API server (k3s v1.36) returned", () => {
  const corpus = (file: string) =>
    (
      parse(readFileSync(new URL(`./testdata/${file}`, import.meta.url), "utf8")) as {
        object: Record<string, unknown>;
      }
    ).object;
  const spec = (o: Record<string, unknown>) => (o.spec ?? {}) as Record<string, unknown>;

  it("a Pod: what admission and the scheduler set, and no manager owns, is left out; what its creator wrote is kept", () => {
    const raw = corpus("pod_graceful-delete_watch.modified.yaml");
    const s = sanitize(raw);
    if (!s.ok) throw new Error(s.message);
    // Set by the ServiceAccount and priority admission plugins, the DefaultTolerationSeconds
    // plugin and the scheduler's binding: in the live object, owned by nobody.
    for (const f of [
      "nodeName",
      "preemptionPolicy",
      "priority",
      "serviceAccount",
      "serviceAccountName",
      "tolerations",
    ]) {
      expect(spec(raw)).toHaveProperty(f);
      expect(spec(s.object)).not.toHaveProperty(f);
    }
    // Owned by the manager that created it (defaults included: an Update owns what it sent).
    expect(Object.keys(spec(s.object)).sort()).toEqual([
      "automountServiceAccountToken",
      "containers",
      "dnsPolicy",
      "enableServiceLinks",
      "restartPolicy",
      "schedulerName",
      "securityContext",
      "terminationGracePeriodSeconds",
    ]);
    expect((spec(s.object).containers as unknown[])[0]).toMatchObject({
      name: "c",
      image: "busybox:1.36",
      terminationMessagePath: "/dev/termination-log",
    });
    expect(s.object.metadata).toEqual({
      name: "p1",
      namespace: "<ns-1>",
      labels: { "mutationlab.configbutler.ai/scenario": "graceful-delete" },
    });
  });

  it("a Deployment created by a client-side write: every field is owned, so nothing is taken for a default", () => {
    const raw = corpus("deployment_scale-patch_watch.modified.1.yaml");
    expect(serverSetFields(raw, (raw.metadata as { managedFields: [] }).managedFields)).toEqual([]);
    const s = sanitize(raw, { controllerManagers: [] });
    if (!s.ok) throw new Error(s.message);
    const { status: _, ...declared } = structuredClone(raw) as Record<string, unknown>;
    expect(spec(s.object)).toEqual(spec(declared));
  });

  it("a server-side apply owns what it sent: a field the server added beside it is left out", () => {
    const raw = corpus("configmap_server-side-apply_watch.modified.yaml");
    const s = sanitize(raw);
    if (!s.ok) throw new Error(s.message);
    expect(s.object.data).toEqual({ key: "updated" });
    // The same apply with a field nobody sent (as a mutating webhook or a schema default adds one).
    const defaulted = structuredClone(raw) as Record<string, unknown>;
    (defaulted.data as Record<string, string>).injected = "by-the-server";
    defaulted.immutable = false;
    const d = sanitize(defaulted);
    if (!d.ok) throw new Error(d.message);
    expect(d.object.data).toEqual({ key: "updated" });
    expect(d.object).not.toHaveProperty("immutable");
  });

  it("an object with no managedFields keeps everything", () => {
    const raw = corpus("pod_graceful-delete_watch.modified.yaml");
    delete (raw.metadata as Record<string, unknown>).managedFields;
    const s = sanitize(raw);
    if (!s.ok) throw new Error(s.message);
    expect(spec(s.object)).toEqual(spec(raw));
  });

  it("managedFields holding only status entries tell nothing apart: everything is kept", () => {
    const raw = corpus("pod_graceful-delete_watch.modified.yaml");
    const meta = raw.metadata as { managedFields: { subresource?: string }[] };
    meta.managedFields = meta.managedFields.filter((e) => e.subresource === "status");
    expect(serverSetFields(raw, meta.managedFields)).toEqual([]);
  });
});
