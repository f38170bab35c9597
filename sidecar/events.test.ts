import { describe, expect, it } from "vitest";
import { fileWorld } from "../test/support/file-world.js";
import { startSidecarWorld } from "../test/support/sidecar-world.js";
import { type EventSpec, KubeEventRecorder, memoryEvents, REPORTING_CONTROLLER } from "./events.js";

/** The Event a claim's hold makes. */
const adopted: EventSpec = {
  type: "Normal",
  reason: "Adopted",
  action: "Hold",
  note: "suspended the Kustomization",
  regarding: { apiVersion: "applygate.dev/v1alpha1", kind: "FluxClaim", namespace: "apps", name: "web" },
};

describe("KubeEventRecorder", () => {
  const world = fileWorld(() => startSidecarWorld({ namespaces: ["apps"] }));

  const list = async () =>
    (
      (await world.kube.custom.listNamespacedCustomObject({
        group: "events.k8s.io",
        version: "v1",
        plural: "events",
        namespace: "apps",
      })) as { items: Array<Record<string, unknown>> }
    ).items;

  it("writes action and reason on every Event, and a repeat joins its series", async () => {
    const recorder = new KubeEventRecorder(world.kube, { instance: "sidecar-0" });
    await recorder.emit(adopted);
    await recorder.emit(adopted);
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
    await expect(m.emit({ ...adopted, action: "" })).rejects.toThrow(/action/);
    expect(m.events).toEqual([]);
  });
});
