import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { crdFiles } from "../queue/crds/files.js";
import { Kube } from "../queue/kube/index.js";
import { type ApiServer, startApiServer } from "../test/cluster/apiserver/index.js";
import { KubeEventRecorder, memoryEvents, REPORTING_CONTROLLER } from "./events.js";

describe("KubeEventRecorder", () => {
  let server: ApiServer;
  let kube: Kube;
  beforeAll(async () => {
    server = await startApiServer({ bookmarkIntervalMs: 100 });
    for (const f of crdFiles()) await server.installCrdFile(f);
    kube = new Kube(server.kubeConfig());
    await kube.core.createNamespace({ body: { metadata: { name: "apps" } } });
  });
  afterAll(async () => server?.close());

  const list = async () =>
    (
      (await kube.custom.listNamespacedCustomObject({
        group: "events.k8s.io",
        version: "v1",
        plural: "events",
        namespace: "apps",
      })) as { items: Array<Record<string, unknown>> }
    ).items;

  it("writes action and reason on every Event, and a repeat joins its series", async () => {
    const recorder = new KubeEventRecorder(kube, { instance: "sidecar-0" });
    const spec = {
      type: "Normal" as const,
      reason: "Adopted",
      action: "Hold",
      note: "suspended the Kustomization",
      regarding: { apiVersion: "applygate.dev/v1alpha1", kind: "FluxClaim", namespace: "apps", name: "web" },
    };
    await recorder.emit(spec);
    await recorder.emit(spec);
    const events = await list();
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      action: "Hold",
      reason: "Adopted",
      type: "Normal",
      reportingController: REPORTING_CONTROLLER,
      reportingInstance: "sidecar-0",
      regarding: { kind: "FluxClaim", name: "web" },
      series: { count: 2 },
    });
  });

  it("the memory recorder refuses an Event without action, as the API server does", async () => {
    const m = memoryEvents();
    const e = {
      type: "Normal" as const,
      reason: "Released",
      action: "",
      note: "x",
      regarding: { apiVersion: "v1", kind: "ConfigMap", namespace: "apps", name: "x" },
    };
    await expect(m.emit(e)).rejects.toThrow(/action/);
    expect(m.events).toEqual([]);
  });
});
