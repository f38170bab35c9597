// The counts read from real Flux's logs (flux-log.ts), on lines as the controllers write them.
import { describe, expect, it } from "vitest";
import { fluxLogOf, parseFluxLog } from "./flux-log.js";

const line = (o: Record<string, unknown>) =>
  JSON.stringify({ level: "info", ts: "2026-12-03T23:46:22.271Z", controller: "kustomization", ...o });
const ks = (name: string, reconcileID: string, msg: string, extra: Record<string, unknown> = {}) =>
  line({
    msg,
    controllerKind: "Kustomization",
    Kustomization: { name, namespace: "t1" },
    namespace: "t1",
    name,
    reconcileID,
    ...extra,
  });
const REV1 = "main@sha1:c32d05d6fb8c436859c8fc58e018c659d355b728";
const REV2 = "main@sha1:0000000000000000000000000000000000000002";

const text = [
  line({ msg: "Starting workers", "worker count": 4 }),
  // The finalizer's reconcile logs nothing but the API server's warning.
  ks(
    "apps",
    "r1",
    'metadata.finalizers: "finalizers.fluxcd.io": prefer a domain-qualified finalizer name including a path (/) to avoid accidental conflicts with other finalizer writers',
  ),
  ks("apps", "r2", "Source artifact not found, retrying in 2s"),
  ks("apps", "r3", "server-side apply completed", {
    output: { "ConfigMap/t1/a": "created" },
    revision: REV1,
  }),
  ks("apps", "r3", "Reconciliation finished in 415ms, next run in 100h0m0s", { revision: REV1 }),
  ks("apps", "r4", "Reconciliation is suspended for this object"),
  ks("other", "r5", "server-side apply completed", { revision: REV2 }),
  '{"level":"info","msg":"half a li',
  "not json",
  ks("apps", "r6", "server-side apply completed", { revision: REV2 }),
  ks("apps", "r6", "Reconciler error", { level: "error" }),
].join("\n");

describe("real Flux's log, read", () => {
  const log = fluxLogOf(parseFluxLog(text));

  it("counts a reconcile once per reconcileID, leaving out API warnings and suspended returns", () => {
    expect(log.reconciles("Kustomization", { namespace: "t1", name: "apps" })).toBe(3);
    expect(log.reconciles("Kustomization", { namespace: "t1", name: "other" })).toBe(1);
    expect(log.reconciles("Kustomization", { namespace: "t2", name: "apps" })).toBe(0);
    expect(log.reconciles("GitRepository", { namespace: "t1", name: "apps" })).toBe(0);
  });

  it("lists the revisions whose server-side apply completed, in order, per object", () => {
    expect(log.appliedRevisions({ namespace: "t1", name: "apps" })).toEqual([REV1, REV2]);
    expect(log.appliedRevisions({ namespace: "t1", name: "other" })).toEqual([REV2]);
  });
});
