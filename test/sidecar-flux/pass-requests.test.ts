/**
 * What a claim reconciler pass costs the API server when it has nothing to change. Every event of
 * a held Kustomization (each status write of kustomize-controller's, each of our own) brings a
 * pass, so a pass that read the applier and its source and the claim from the API server made
 * an apply cost several times what Flux's own receiver costs (issue 38). A pass decides on the
 * watch caches; the API server is read only before a write, or when the cache lags what this
 * process last read or wrote of the claim.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KUSTOMIZATION } from "../../sidecar/flux/resources.js";
import { until } from "../support/sidecar-world.js";
import { type ClaimWorld, startClaimWorld } from "./claim-world.js";

const USER = "pass-count";

describe("a claim reconciler pass with nothing to change", () => {
  let cw: ClaimWorld;
  beforeAll(async () => {
    cw = await startClaimWorld({}, { user: USER });
  });
  afterAll(async () => cw?.stop());

  it("reads neither the Kustomization, its GitRepository nor the claim from the API server, and writes nothing", async () => {
    const ns = await cw.namespaceWithApplier();
    await cw.createClaim(ns, true);
    await cw.waitFor(ns, "InControl", (c) => c.status === "True" && c.reason === "Suspended", Date.now());
    const reconciler = cw.sidecar.reconciler;
    await reconciler.whenIdle();

    // Label 0 untraced: its pass comes after every event of the adoption (one watch, in order).
    let trace: { requests: string[]; stop(): void } | undefined;
    const passes: number[] = [];
    for (let i = 0; i < 6; i++) {
      if (i === 1) trace = cw.world.api.traceRequests(USER);
      const before = reconciler.passCount();
      // Somebody labels the Kustomization: a watch event, so a pass of its claim.
      await cw.world.kube.mergePatch(KUSTOMIZATION, ns, "apps", { metadata: { labels: { seen: `l${i}` } } });
      await until(async () => reconciler.passCount() > before, `the pass after label ${i}`);
      await reconciler.whenIdle();
      passes.push(reconciler.passCount() - before);
    }
    trace?.stop();
    const requests = trace?.requests ?? ["no trace"];
    const why = requests.join("\n");
    expect(passes.every((n) => n >= 1)).toBe(true);
    expect(
      requests.filter((q) => q.startsWith("GET ")),
      why,
    ).toEqual([]);
    expect(
      requests.filter((q) => !q.startsWith("GET ")),
      why,
    ).toEqual([]);
    // Held as before.
    expect(await cw.condition(ns, "InControl")).toMatchObject({ status: "True", reason: "Suspended" });
  });

  it("a resume by somebody else is still caught on the pass its event brings", async () => {
    const ns = await cw.namespaceWithApplier();
    await cw.createClaim(ns, true);
    await cw.waitFor(ns, "InControl", (c) => c.status === "True" && c.reason === "Suspended", Date.now());
    await cw.world.kube.mergePatch(KUSTOMIZATION, ns, "apps", { spec: { suspend: false } });
    await until(async () => {
      const ks = await cw.world.kube.get(KUSTOMIZATION, ns, "apps");
      return (ks?.spec as { suspend?: boolean } | undefined)?.suspend === true;
    }, "the Kustomization suspended again");
  });
});
