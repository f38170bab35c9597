/**
 * The claim reconciler reacts to events: through startSidecar (the real Flux kind over fluxsim and
 * real Redis), a claim's first status follows its creation, and a claim created together with the
 * GitTarget naming it is bound and held, with the safety-net pass ten minutes away. A claim whose
 * applier is slow to read holds up no other claim. (`npm run bench -- claims` prints the times.)
 */
import { expect, it } from "vitest";
import { fileWorld } from "../support/file-world.js";
import { startClaimWorld } from "./claim-world.js";

const w = fileWorld(() => startClaimWorld());

it("a claim created alone gets its first status from the event, not the safety-net pass", async () => {
  const ns = await w.namespaceWithApplier();
  await w.createClaim(ns);
  await w.waitFor(ns, "Configured", () => true, Date.now());
  expect(await w.condition(ns, "Configured")).toMatchObject({ status: "Unknown", reason: "NotReferenced" });
  expect(await w.condition(ns, "Ready")).toMatchObject({ status: "True", reason: "NotReferenced" });
});

it("a claim and the GitTarget naming it, created together, are bound and held from the events", async () => {
  const ns = await w.namespaceWithApplier();
  await w.createClaim(ns, true);
  await w.waitFor(ns, "InControl", (c) => c.status === "True", Date.now());
  expect(await w.condition(ns, "Configured")).toMatchObject({ status: "True", reason: "Bound" });
});

it("a claim whose applier reads are slow holds up no other claim: each claim is reconciled on its own", async () => {
  const slow = await w.namespaceWithApplier();
  const quick = await w.namespaceWithApplier();
  // Every read of the slow claim's Kustomization takes 5 s (its watch is cluster-wide, not slowed).
  w.world.api.faults.latency(5_000, {
    method: "GET",
    pathPrefix: `/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/${slow}/kustomizations/apps`,
  });
  try {
    await w.createClaim(slow, true);
    await w.createClaim(quick);
    await w.waitFor(quick, "Configured", () => true, Date.now());
    // Reconciled while the slow claim still waits on its applier's reads (not bound yet): nothing
    // queued it behind that claim.
    expect((await w.condition(slow, "Configured"))?.reason).not.toBe("Bound");
  } finally {
    w.world.api.faults.latency(0);
  }
});
