import { describe, expect, it } from "vitest";
import type { KObject } from "../../queue/kube/index.js";
import { appliesSuspend, checkSuspendOwnership, suspendAppliers } from "./suspend-owner.js";

const withSuspend = { "f:spec": { "f:suspend": {} } };
const withoutSuspend = { "f:spec": { "f:interval": {}, "f:path": {} } };
const ks = (managedFields: unknown[]): KObject => ({
  metadata: { name: "app", namespace: "apps", managedFields: managedFields as never },
});

describe("who owns spec.suspend", () => {
  it("another manager applying spec.suspend is refused, named", () => {
    const k = ks([
      { manager: "helm", operation: "Apply", fieldsV1: withSuspend },
      { manager: "applygate", operation: "Apply", fieldsV1: withSuspend },
    ]);
    const r = checkSuspendOwnership(k);
    expect(r).toMatchObject({ ok: false, reason: "SuspendOwnedElsewhere", managers: ["helm"] });
    expect(r.ok ? "" : r.message).toContain("helm");
  });
  it("an Update entry (flux resume, kubectl edit) is no refusal", () => {
    const k = ks([{ manager: "flux", operation: "Update", fieldsV1: withSuspend }]);
    expect(checkSuspendOwnership(k)).toEqual({ ok: true });
  });
  it("an apply that leaves spec.suspend out is no refusal", () => {
    const k = ks([{ manager: "kustomize-controller", operation: "Apply", fieldsV1: withoutSuspend }]);
    expect(suspendAppliers(k)).toEqual([]);
  });
  it("our own apply is ours; a status entry is never spec", () => {
    const k = ks([
      { manager: "applygate", operation: "Apply", fieldsV1: withSuspend },
      { manager: "other", operation: "Apply", subresource: "status", fieldsV1: withSuspend },
    ]);
    expect(checkSuspendOwnership(k)).toEqual({ ok: true });
    expect(appliesSuspend(k)).toBe(true);
    expect(appliesSuspend(ks([]))).toBe(false);
  });
  it("an entry that does not fit is no owner; a manager that is no string names none", () => {
    const k = ks([
      "helm",
      { manager: "helm", operation: "Apply", fieldsV1: "f:spec" },
      { manager: "kustomize", operation: "Apply", fieldsV1: { "f:spec": ["f:suspend"] } },
      { manager: 7, operation: "Apply", fieldsV1: withSuspend },
      { manager: "tenant", operation: 1, fieldsV1: withSuspend },
    ]);
    expect(suspendAppliers(k)).toEqual([]);
    expect(checkSuspendOwnership(k)).toEqual({ ok: true });
  });
});
