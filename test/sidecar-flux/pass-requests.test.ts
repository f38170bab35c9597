/**
 * What a claim reconciler pass costs the API server when it has nothing to change. Every event of
 * a held Kustomization (each status write of kustomize-controller's, each of our own) brings a
 * pass, so a pass that read the applier and its source and the claim from the API server made
 * an apply cost several times what Flux's own receiver costs (issue 38). A pass decides on the
 * watch caches; the API server is read only before a write, or when the cache lags what this
 * process last read or wrote of the claim.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RESOURCES } from "../../queue/kube/index.js";
import { KUSTOMIZATION } from "../../sidecar/flux/resources.js";
import { GitPeer } from "../git/peer.js";
import { attemptFor, claimWatchCaughtUp, until } from "../support/sidecar-world.js";
import { type ClaimWorld, startClaimWorld } from "./claim-world.js";
import { configMap } from "./harness.js";

const USER = "pass-count";
const APPLY_USER = "apply-count";

/**
 * One apply: the executor's 11 (test/sidecar-flux/request-count.test.ts: the claim read, the
 * window's list and watch, the record, the standing recheck's two reads, the resume, Running,
 * Settling, the suspend, the end), the source's read and stamp (the artifact is not fetched
 * beforehand here), a discovery read, the Event of the operation's end, the claim passes' own
 * condition writes (Applying, then Suspended again), and the passes' reads of the claim when its
 * watch delivered a version before the answer to the write that made it, or a write of theirs met
 * a 409: 17 to 23 in ten applies on a quiet machine. Those last reads are races, more of them
 * under load, so the bound leaves room for one per pass. Before passes decided on the caches each
 * of them also read the Kustomization three times and the GitRepository once.
 */
const REQUESTS_PER_APPLY = 30;

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
    await claimWatchCaughtUp(cw.sidecar.kube, RESOURCES.fluxClaim, { namespace: ns, name: "claim" });
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

describe("one apply through the whole sidecar", () => {
  let cw: ClaimWorld;
  beforeAll(async () => {
    // Every read while following is woken by a watch event: no poll re-read within an apply.
    cw = await startClaimWorld({ options: { pollMs: 60_000 } }, { user: APPLY_USER });
  });
  afterAll(async () => cw?.stop());

  it(`costs at most ${REQUESTS_PER_APPLY} requests with the claim passes its events bring, no read of the Kustomization and one of its GitRepository`, async () => {
    const ns = await cw.namespaceWithApplier();
    await cw.createClaim(ns, true);
    await cw.waitFor(ns, "InControl", (c) => c.status === "True" && c.reason === "Suspended", Date.now());
    const reconciler = cw.sidecar.reconciler;
    const url = cw.world.git.repoUrl(ns);
    const target = await cw.world.kube.get(RESOURCES.gitTarget, ns, "apps");
    const provider = await cw.world.kube.get(RESOURCES.gitProvider, ns, "repo");
    if (!target?.metadata.uid || !provider) throw new Error("no GitTarget or GitProvider");
    const peer = await GitPeer.clone(url);
    try {
      for (let i = 0; i < 3; i++) {
        const commit = await peer.commitAndPush("apps/cm.yaml", configMap("app-config", `v${i}`), `v${i}`);
        await reconciler.whenIdle();
        const trace = cw.world.api.traceRequests(APPLY_USER);
        const attempt = await cw.world.queues.send(
          attemptFor({
            claim: { kind: "FluxClaim", namespace: ns, name: "claim" },
            applier: { kind: "flux", namespace: ns, name: "apps" },
            repository: url,
            branchKey: `${url}@main`,
            commit,
            targets: [{ uid: target.metadata.uid, namespace: ns, name: "apps", reason: "ForeignCommit" }],
          }),
        );
        await cw.world.queues.reported(attempt.token, "Succeeded");
        // The passes the apply's last events bring (the claim back to Suspended) count too.
        await until(async () => {
          const c = await cw.condition(ns, "InControl");
          return c?.reason === "Suspended";
        }, "the claim held and settled again");
        await reconciler.whenIdle();
        trace.stop();
        // The first apply of a client also lists and watches the inventory's kind: not counted.
        if (i === 0) continue;
        const why = trace.requests.join("\n");
        expect(
          trace.requests.filter((q) => /^GET .*\/kustomizations\//.test(q)),
          why,
        ).toEqual([]);
        // The one read of the source: its artifact, not seen holding the commit in the cache, is
        // read from the API server before the stamp asks for a fetch.
        expect(
          trace.requests.filter((q) => /^GET .*\/gitrepositories\//.test(q)),
          why,
        ).toHaveLength(1);
        expect(trace.requests.length, why).toBeLessThanOrEqual(REQUESTS_PER_APPLY);
      }
    } finally {
      await peer.remove();
    }
  });
});
