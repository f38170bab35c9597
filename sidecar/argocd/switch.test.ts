import { describe, expect, it } from "vitest";
import type { KObject } from "../../queue/kube/index.js";
import { applierWriteOf as ownWriteOf } from "../applier-write.js";
import { windowLive } from "../window-observer.js";
import { appInstance } from "./application.js";
import { desiredAfterHandBack, judgeSwitch, planHandBack, planHold } from "./switch.js";
import { ARGO_MANAGERS, trackedInstance } from "./window-writes.js";

const applierWriteOf = (o: Parameters<typeof ownWriteOf>[0], previous?: unknown[]) =>
  ownWriteOf(o, ARGO_MANAGERS, previous);

const enabledFields = { "f:spec": { "f:syncPolicy": { "f:automated": { "f:enabled": {} } } } };
const entry = (manager: string, operation: string, fieldsV1: Record<string, unknown> = enabledFields) => ({
  manager,
  operation,
  fieldsType: "FieldsV1",
  fieldsV1,
  time: "2026-01-01T00:00:00Z",
});

function app(automated: Record<string, unknown> | undefined, meta: Record<string, unknown> = {}): KObject {
  return {
    // managedFields as the API server returns them (times as strings), not as the client types them.
    metadata: { name: "web", namespace: "argocd", ...meta } as KObject["metadata"],
    spec: {
      source: { repoURL: "http://git/repo", targetRevision: "main" },
      ...(automated ? { syncPolicy: { automated } } : {}),
    },
  };
}
const appSetOwner = {
  ownerReferences: [
    { apiVersion: "argoproj.io/v1alpha1", kind: "ApplicationSet", name: "gen", uid: "u", controller: true },
  ],
};
const ok = { enabledFieldMissing: false };

describe("Configured: whose switch it is", () => {
  it("holds an ordinary Application", () => {
    expect(judgeSwitch(app({ prune: true }), ok)).toEqual({ configured: true });
  });
  it("refuses Argo CD before 3.1 first", () => {
    expect(judgeSwitch(app(undefined), { enabledFieldMissing: true })).toMatchObject({
      configured: false,
      reason: "ArgoCDVersionNotSupported",
    });
  });
  it("refuses multi-source as UnsupportedSource", () => {
    const a = app(undefined);
    a.spec = { sources: [{ repoURL: "a" }, { repoURL: "b" }] };
    expect(judgeSwitch(a, ok)).toMatchObject({ configured: false, reason: "UnsupportedSource" });
  });
  it("refuses an ApplicationSet's Application while automated sync is on, not while its template keeps it off", () => {
    expect(judgeSwitch(app({ prune: true }, appSetOwner), ok)).toMatchObject({
      configured: false,
      reason: "OwnedByApplicationSet",
    });
    expect(
      judgeSwitch(app({ enabled: false }, appSetOwner), {
        ...ok,
        applicationSetAutomated: { enabled: false },
      }),
    ).toEqual({
      configured: true,
    });
    // held off by us right now, but the template switches it on again on its next reconcile
    expect(
      judgeSwitch(app({ enabled: false }, appSetOwner), { ...ok, applicationSetAutomated: {} }),
    ).toMatchObject({
      reason: "OwnedByApplicationSet",
    });
    // a non-controller owner reference is no ApplicationSet of the Application
    const notController = { ownerReferences: [{ ...appSetOwner.ownerReferences[0]!, controller: false }] };
    expect(judgeSwitch(app({}, notController), ok)).toEqual({ configured: true });
  });
  it("refuses a switch another manager applies while on; an Update entry is no owner", () => {
    expect(
      judgeSwitch(app({ enabled: true }, { managedFields: [entry("platform", "Apply")] }), ok),
    ).toMatchObject({
      configured: false,
      reason: "AutomatedSyncOwnedElsewhere",
      message: expect.stringContaining("platform"),
    });
    expect(
      judgeSwitch(app({ enabled: true }, { managedFields: [entry("kubectl-edit", "Update")] }), ok),
    ).toEqual({
      configured: true,
    });
    expect(judgeSwitch(app({ enabled: false }, { managedFields: [entry("platform", "Apply")] }), ok)).toEqual(
      {
        configured: true,
      },
    );
  });
});

describe("holding the switch off", () => {
  it("adopts, re-holds a switch turned on with ClaimedResourceReconciled, and writes nothing when held", () => {
    expect(planHold(app({ prune: true }), false)).toEqual({ write: true, event: "Adopted", wasOn: true });
    expect(planHold(app({ prune: true }), true)).toEqual({
      write: true,
      event: "ClaimedResourceReconciled",
      wasOn: true,
    });
    const held = app({ enabled: false }, { managedFields: [entry("applygate", "Apply")] });
    expect(planHold(held, true)).toEqual({ write: false });
    // off, but by somebody else's hand: take the field quietly
    expect(planHold(app({ enabled: false }), true)).toEqual({ write: true, wasOn: false });
  });
});

describe("handing it back", () => {
  const held = (automated: Record<string, unknown>) =>
    app(automated, { managedFields: [entry("applygate", "Apply")] });
  it("releases when giving the field up leaves the switch as it stood before", () => {
    expect(planHandBack(held({ enabled: false, prune: true }), true, app({ prune: true }))).toEqual({
      action: "release",
    });
    expect(planHandBack(held({ enabled: false }), false, app(undefined))).toEqual({ action: "release" });
  });
  it("sets the value and keeps it when letting go would leave it otherwise", () => {
    // it was off (NoAutomated) but somebody added prune meanwhile: letting go would switch it on
    expect(planHandBack(held({ enabled: false, prune: true }), false, app({ prune: true }))).toEqual({
      action: "set",
      enabled: false,
    });
    // it was on but somebody shares enabled: false: letting go would leave it off
    expect(planHandBack(held({ enabled: false }), true, app({ enabled: false }))).toEqual({
      action: "set",
      enabled: true,
    });
  });
  it("does nothing when nothing of ours is there", () => {
    expect(planHandBack(app({ prune: true }), true, app({ prune: true }))).toEqual({ action: "none" });
  });
  it("follows the ApplicationSet's template over the recorded state", () => {
    expect(desiredAfterHandBack("AutomatedOn", { enabled: false }, true)).toBe(false);
    expect(desiredAfterHandBack("AutomatedOn", undefined, true)).toBe(true);
    expect(desiredAfterHandBack("NoAutomated", undefined, false)).toBe(false);
    expect(desiredAfterHandBack(undefined, undefined, false)).toBeUndefined();
  });
});

describe("the applier's own writes", () => {
  const obj = (entries: ReturnType<typeof entry>[], tracking?: string) => ({
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: {
      name: "cm",
      namespace: "web",
      resourceVersion: "9",
      ...(tracking ? { annotations: { "argocd.argoproj.io/tracking-id": tracking } } : {}),
      managedFields: entries,
    },
  });
  const at = (manager: string, time: string) => ({ ...entry(manager, "Update", {}), time });
  it("reads the instance from the tracking annotation", () => {
    expect(trackedInstance(obj([], "apps_web:/ConfigMap:web/cm"))).toBe("apps_web");
    expect(trackedInstance(obj([]))).toBeUndefined();
  });
  it("is Argo CD's write when its managers alone are newest", () => {
    const w = applierWriteOf(
      obj([at("kubectl-edit", "2026-01-01T00:00:00Z"), at("argocd-controller", "2026-01-01T00:00:05Z")]),
    );
    expect(w).toMatchObject({
      manager: "argocd-controller",
      writtenAt: "2026-01-01T00:00:05Z",
      resourceVersion: "9",
    });
    expect(applierWriteOf(obj([at("argocd-application-controller", "2026-01-01T00:00:05Z")]))?.manager).toBe(
      "argocd-application-controller",
    );
  });
  it("is no applier write when another manager is newest or ties", () => {
    expect(
      applierWriteOf(
        obj([at("argocd-controller", "2026-01-01T00:00:00Z"), at("kubectl-edit", "2026-01-01T00:00:05Z")]),
      ),
    ).toBeUndefined();
    expect(
      applierWriteOf(
        obj([at("argocd-controller", "2026-01-01T00:00:05Z"), at("kubectl-edit", "2026-01-01T00:00:05Z")]),
      ),
    ).toBeUndefined();
  });
  it("belongs to the windows of its Application while open or within the grace", () => {
    const o = obj([], "apps_web:/ConfigMap:web/cm");
    expect(trackedInstance(o)).toBe("apps_web");
    expect(appInstance({ namespace: "apps", name: "web" }, "argocd")).toBe("apps_web");
    expect(windowLive({}, 5000, 10_000)).toBe(true);
    expect(windowLive({ closedAt: 1000 }, 5000, 10_000)).toBe(true);
    expect(windowLive({ closedAt: 1000 }, 20_000, 10_000)).toBe(false);
  });
});
