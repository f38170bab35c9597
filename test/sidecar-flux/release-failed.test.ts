/**
 * A hand-back that fails for good: through startSidecar (the claim reconciler with the real Flux
 * kind over fluxsim), every write to the Kustomization fails, so the claim can never release it.
 * Past the release deadline the claim lets go with exactly one Event, a Warning ReleaseFailed, and
 * its InControl condition says where the applier was left; it never also says Released.
 */
import { afterAll, expect, it } from "vitest";
import { type KObject, RESOURCES } from "../../queue/kube/index.js";
import { CLAIM_FINALIZER } from "../../sidecar/claims/reconciler.js";
import { fileWorld } from "../support/file-world.js";
import { startClaimWorld } from "./claim-world.js";
import { until } from "./harness.js";

const RELEASE_DEADLINE_MS = 400;

const w = fileWorld(() => startClaimWorld({ releaseTimeoutMs: RELEASE_DEADLINE_MS }));
afterAll(() => w.world.api.faults.reset());

interface EventObject {
  type: string;
  reason: string;
  action: string;
  note: string;
  regarding: { kind: string; name: string };
}

it("a hand-back that fails for good ends with one Warning ReleaseFailed, and InControl says so", async () => {
  const ns = await w.namespaceWithApplier();
  await w.createClaim(ns, true);
  await w.waitFor(ns, "InControl", (c) => c.status === "True", Date.now());

  // Every write to the Kustomization fails from now on: the release can never land.
  w.world.api.faults.failNext(1_000_000, {
    method: "PATCH",
    pathPrefix: `/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/${ns}/kustomizations/apps`,
    status: 500,
    message: "the API server is unwell",
  });
  // No GitTarget names the claim any more: it hands the Kustomization back.
  await w.world.kube.delete(RESOURCES.gitTarget, ns, "apps");
  await w.waitFor(ns, "InControl", (c) => c.reason === "Releasing", Date.now());

  // Past the deadline the claim lets go of it: the finalizer is dropped.
  await until(async () => {
    const c = await w.world.kube.get<KObject>(RESOURCES.fluxClaim, ns, "claim");
    return c && !(c.metadata.finalizers ?? []).includes(CLAIM_FINALIZER);
  }, "the claim to let go");
  // The Event is recorded before the finalizer is dropped; anything after it would be a second pass.
  await w.sidecar.reconciler.whenIdle();

  const events = (await w.world.kube.list<EventObject>(RESOURCES.event, ns)).items.filter(
    (e) => e.regarding.kind === "FluxClaim" && e.regarding.name === "claim" && e.action === "Release",
  );
  expect(events.map((e) => `${e.type} ${e.reason}`)).toEqual(["Warning ReleaseFailed"]);
  expect(events[0]?.note).toMatch(/left suspended/);

  const inControl = await w.condition(ns, "InControl");
  expect(inControl).toMatchObject({ status: "False", reason: "ReleaseFailed" });
  expect(inControl?.message).toMatch(/left suspended/);
  // A later pass of the claim, which holds nothing now, still says where the applier was left.
  const passes = w.sidecar.reconciler.passCount();
  w.sidecar.reconciler.schedule(0);
  await until(async () => w.sidecar.reconciler.passCount() > passes, "another pass");
  await w.sidecar.reconciler.whenIdle();
  expect(await w.condition(ns, "InControl")).toMatchObject({ status: "False", reason: "ReleaseFailed" });
});
