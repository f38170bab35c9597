import { afterEach, describe, expect, it } from "vitest";
import { claimStatusOf, type KObject, type Kube, RESOURCES } from "../../queue/kube/index.js";
import { silentLogger } from "../../queue/log.js";
import type { ApiServer } from "../../test/cluster/apiserver/index.js";
import { fileWorld } from "../../test/support/file-world.js";
import { startSidecarWorld } from "../../test/support/sidecar-world.js";
import { untilWith } from "../../test/support/wait.js";
import type { ClaimController, ExternalCheck } from "../applier-kind.js";
import { memoryEvents } from "../events.js";
import { Following } from "../following.js";
import { completeOperation, readOperation, recordOperation, updateOperation } from "../operation-record.js";
import { memoryReporter } from "../reporter.js";
import { findCondition } from "./conditions.js";
import { CLAIM_FINALIZER, ClaimReconciler } from "./reconciler.js";

const REPO = "https://git.example/org/repo";
let server: ApiServer;
let kube: Kube;
let ns = 0;

const until = untilWith({ timeoutMs: 5000, everyMs: 20 });

/** A kind whose applier is a name in a map: records which hooks ran. */
function fakeController() {
  const calls: string[] = [];
  const state = {
    calls,
    branch: "main",
    external: { configured: true } as ExternalCheck,
    handBackDone: true,
    /** The next hold calls that throw. */
    holdFailures: 0,
  };
  const controller: ClaimController = {
    applierOf: (claim) =>
      (claim.spec as { kustomizationRef: { namespace: string; name: string } }).kustomizationRef,
    source: async () => ({ state: "Known", url: REPO, branch: state.branch }),
    checkExternal: async () => state.external,
    hold: async (claim) => {
      calls.push(`hold:${claim.metadata.namespace}/${claim.metadata.name}`);
      if (state.holdFailures > 0) {
        state.holdFailures--;
        throw new Error("the applier could not be read");
      }
      return {
        conditions: [
          { type: "InControl", status: "True", reason: "Suspended", message: "held" },
          { type: "Ready", status: "True", reason: "Suspended", message: "held" },
        ],
        status: { previousSuspendState: "Resumed" },
      };
    },
    handBack: async (claim, _a, ctx) => {
      calls.push(
        `handBack:${claim.metadata.namespace}/${claim.metadata.name}${ctx.successor ? `->${ctx.successor}` : ""}`,
      );
      return { done: state.handBackDone };
    },
  };
  return { controller, state };
}

describe("claim reconciler", () => {
  let reconciler: ClaimReconciler | undefined;
  let namespace: string;

  fileWorld(async () => {
    const w = await startSidecarWorld({ namespaces: ["flux-system"] });
    server = w.api;
    kube = w.kube;
    return w;
  });
  afterEach(async () => {
    await reconciler?.stop();
    reconciler = undefined;
  });

  const grantYaml = (name: string, from: string, to?: string) => `apiVersion: applygate.dev/v1alpha1
kind: ApplierGrant
metadata: {name: ${name}, namespace: flux-system}
spec: {from: [{namespace: ${from}, kind: FluxClaim}]${to ? `, to: [{name: ${to}}]` : ""}}
`;

  async function setup(
    opts: {
      unfollowedGraceMs?: number;
      grant?: boolean;
      resyncMs?: number;
      retryBackoffMs?: () => number;
      /** Start another reconciler in the current test's namespace. */
      again?: boolean;
    } = {},
  ) {
    if (!opts.again) {
      namespace = `ns${++ns}`;
      await kube.core.createNamespace({ body: { metadata: { name: namespace } } });
      // The Kustomizations live in flux-system: the claims hold them through a grant there.
      if (opts.grant !== false) await server.applyYaml(grantYaml(`grant-${namespace}`, namespace));
      // Every test's namespace names the same repository: the first GitProvider holds it and
      // admits the others (queue/tenancy.ts).
      await server.applyYaml(`apiVersion: applygate.dev/v1alpha1
kind: GitProvider
metadata: {name: repo, namespace: ${namespace}}
spec: {url: "${REPO}.git", type: github, webhookSecretRef: {name: hook}, accessFrom: {namespaces: ["*"]}}
`);
    }
    const { controller, state } = fakeController();
    const events = memoryEvents();
    const reporter = memoryReporter();
    const following = new Following();
    reconciler = new ClaimReconciler({
      claimType: RESOURCES.fluxClaim,
      kube,
      log: silentLogger(),
      events,
      following,
      controller,
      reporter,
      ...(opts.unfollowedGraceMs !== undefined ? { unfollowedGraceMs: opts.unfollowedGraceMs } : {}),
      ...(opts.resyncMs !== undefined ? { resyncMs: opts.resyncMs } : {}),
      ...(opts.retryBackoffMs ? { retryBackoffMs: opts.retryBackoffMs } : {}),
    });
    await reconciler.start();
    return { state, events, reporter, following };
  }

  // Claims of earlier tests stay in the cluster: each test names its own Kustomization.
  const claimYaml = (name: string, ks = `web-${namespace}`) => `apiVersion: applygate.dev/v1alpha1
kind: FluxClaim
metadata: {name: ${name}, namespace: ${namespace}}
spec: {kustomizationRef: {name: ${ks}, namespace: flux-system}}
`;
  // Each test's namespace writes folders of its own on the shared branch (one namespace per folder).
  const targetYaml = (name: string, claim: string) => `apiVersion: applygate.dev/v1alpha1
kind: GitTarget
metadata: {name: ${name}, namespace: ${namespace}}
spec: {providerRef: {name: repo}, branch: main, path: apps/${namespace}/${name}, claimRef: {kind: FluxClaim, name: ${claim}}}
`;
  const get = (name: string) => kube.get<KObject>(RESOURCES.fluxClaim, namespace, name);
  const cond = async (name: string, type: string) =>
    findCondition(claimStatusOf(await get(name))?.conditions, type);
  /** Waits until the claim's condition of `type` says `reason`; answers it. */
  const condSays = (name: string, type: string, reason: string) =>
    until(async () => {
      const c = await cond(name, type);
      return c?.reason === reason && c;
    }, `${type} ${reason} on ${name}`);
  /** The claim `name` and the GitTarget `target` naming it. */
  const named = async (name: string, target: string) => {
    await server.applyYaml(claimYaml(name));
    await server.applyYaml(targetYaml(target, name));
  };
  /** The claim `web` named by the GitTarget `t1`, once the reconciler holds its applier; its locator. */
  const heldWeb = async () => {
    await named("web", "t1");
    await until(async () => (await cond("web", "InControl"))?.status === "True", "held");
    return { type: RESOURCES.fluxClaim, namespace, name: "web" };
  };

  it("an unreferenced claim is Ready=True NotReferenced, holds nothing and carries no finalizer", async () => {
    const { state } = await setup();
    await server.applyYaml(claimYaml("idle"));
    const ready = await condSays("idle", "Ready", "NotReferenced");
    expect(ready.status).toBe("True");
    expect((await cond("idle", "Configured"))?.status).toBe("Unknown");
    expect((await get("idle"))?.metadata.finalizers ?? []).not.toContain(CLAIM_FINALIZER);
    expect(state.calls.filter((c) => c.includes(`${namespace}/`))).toEqual([]);
  });

  it("a claim an eligible GitTarget references gets the finalizer first, then is held", async () => {
    const { state } = await setup();
    await named("web", "t1");
    await until(async () => (await cond("web", "InControl"))?.reason === "Suspended", "held");
    const claim = await get("web");
    expect(claim?.metadata.finalizers).toContain(CLAIM_FINALIZER);
    expect(await cond("web", "Configured")).toMatchObject({ status: "True", reason: "Bound" });
    expect((claim?.status as { previousSuspendState?: string } | undefined)?.previousSuspendState).toBe(
      "Resumed",
    );
    expect(state.calls).toContain(`hold:${namespace}/web`);
  });

  it("a second claim for the same applier waits in line: HeldByAnotherClaim, never held", async () => {
    const { state } = await setup();
    await named("first", "t1");
    await until(async () => (await cond("first", "InControl"))?.status === "True", "first held");
    await named("second", "t2");
    const c = await condSays("second", "Configured", "HeldByAnotherClaim");
    expect(c.status).toBe("False");
    expect(c.message).toContain(`${namespace}/first`);
    expect(state.calls).not.toContain(`hold:${namespace}/second`);
  });

  it("a source on another branch refuses: SourceMismatch, nothing held", async () => {
    const { state } = await setup();
    state.branch = "release";
    await named("web", "t1");
    const c = await condSays("web", "Configured", "SourceMismatch");
    expect(c.status).toBe("False");
    expect(state.calls.filter((c) => c.includes(`${namespace}/`))).toEqual([]);
  });

  it("the kind's refusal (checkExternal) is Configured=False with its reason, and nothing is held", async () => {
    const { state } = await setup();
    state.external = {
      configured: false,
      reason: "SuspendOwnedElsewhere",
      message: "flux-operator applies spec.suspend",
    };
    await named("web", "t1");
    await until(async () => (await cond("web", "Configured"))?.reason === "SuspendOwnedElsewhere", "refused");
    expect((await cond("web", "Ready"))?.status).toBe("False");
    expect(state.calls.filter((c) => c.includes(`${namespace}/`))).toEqual([]);
  });

  it("no GitTarget referencing it anymore hands back, then drops the finalizer (Released Event)", async () => {
    const { state, events } = await setup();
    await heldWeb();
    await kube.delete(RESOURCES.gitTarget, namespace, "t1");
    await until(
      async () => !((await get("web"))?.metadata.finalizers ?? []).includes(CLAIM_FINALIZER),
      "released",
    );
    expect(state.calls).toContain(`handBack:${namespace}/web`);
    // One Event for the outcome, whoever handed the applier back.
    expect(events.events.filter((e) => e.action === "Release").map((e) => `${e.type} ${e.reason}`)).toEqual([
      "Normal Released",
    ]);
    expect(events.events.every((e) => e.action !== "")).toBe(true);
    await until(async () => (await cond("web", "Ready"))?.reason === "NotReferenced", "idle again");
  });

  it("a hand-back not done keeps the finalizer and shows InControl=False Releasing", async () => {
    const { state } = await setup();
    await heldWeb();
    state.handBackDone = false;
    await kube.delete(RESOURCES.fluxClaim, namespace, "web");
    await until(async () => (await cond("web", "InControl"))?.reason === "Releasing", "releasing");
    expect((await get("web"))?.metadata.deletionTimestamp).toBeDefined();
    state.handBackDone = true;
    reconciler!.schedule(0);
    await until(async () => (await get("web")) === undefined, "claim gone");
  });

  it("an operation in flight nobody follows is completed Failed (OperationUnfollowed) after the grace period", async () => {
    const { events, reporter } = await setup({ unfollowedGraceMs: 200 });
    const loc = await heldWeb();
    await recordOperation(kube, loc, {
      token: "lost",
      commit: "e".repeat(40),
      targets: [{ uid: "u", reason: "CatchUp" }],
    });
    const op = await until(async () => {
      reconciler!.schedule(0);
      const o = await readOperation(kube, loc);
      return o?.phase === "Failed" && o;
    }, "unfollowed settled");
    expect(op.outcome).toBe("OperationUnfollowed");
    expect(events.events.find((e) => e.reason === "OperationUnfollowed")).toMatchObject({ type: "Warning" });
    expect(reporter.reports.find((r) => r.token === "lost")).toMatchObject({
      phase: "Failed",
      reason: "OperationUnfollowed",
      branchKey: `${namespace}/repo:git.example/org/repo@main`,
    });
  });

  it("an operation this process ended whose record still shows it in flight is brought level at once, reported nothing again (soak seed 30052)", async () => {
    // The Flux sidecar found its attempt Stale before the resume and reported it, but a storm of
    // conflicts outlasted the retries of the record's withdrawal: the claim still showed it
    // Requested, refused the next attempts (OperationInFlight), and a minute later the record was
    // settled as unfollowed and reported Failed: two ends for one operation.
    const { reporter, following, events } = await setup({ unfollowedGraceMs: 200 });
    const loc = await heldWeb();
    const endedHere = async (token: string, phase: "Stale" | "Succeeded", resumed = false) => {
      await recordOperation(kube, loc, {
        token,
        commit: "a".repeat(40),
        targets: [{ uid: "u", reason: "Refusal" }],
      });
      if (resumed)
        await updateOperation(kube, loc, token, { phase: "Running", startedAt: new Date().toISOString() });
      following.follow(token, `${namespace}/web`)({ ended: true, phase });
    };
    const settled = (token: string) =>
      until(async () => {
        reconciler!.schedule(0);
        const o = await readOperation(kube, loc);
        return (o?.token !== token || o.phase === "Succeeded" || o.phase === "Failed") && (o ?? "gone");
      }, `the record of ${token} level`);

    // Ended before anything started: the record is taken away.
    await endedHere("stale", "Stale");
    expect(await settled("stale")).toBe("gone");
    // Ended after the resume: completed as reported, or Failed for an end that is no record phase.
    await endedHere("done", "Succeeded", true);
    expect(await settled("done")).toMatchObject({ token: "done", phase: "Succeeded" });
    await endedHere("stale-late", "Stale", true);
    expect(await settled("stale-late")).toMatchObject({ token: "stale-late", phase: "Failed" });
    // Past the grace period nothing was settled as unfollowed, and nothing reported.
    await new Promise((r) => setTimeout(r, 400)); // an absence, waited out: twice the grace period
    reconciler!.schedule(0);
    expect(reporter.reports.filter((r) => ["stale", "done", "stale-late"].includes(r.token))).toEqual([]);
    expect(events.events.filter((e) => e.reason === "OperationUnfollowed")).toEqual([]);
  });

  it("the end of an operation an earlier process completed is reported again, once; its own completions are not", async () => {
    // Found by the soak (seed 2428, 6 actions): an Argo CD sidecar SIGKILLed between recording
    // Succeeded on the claim and queuing the report. The next sidecar saw nothing in flight, and
    // the worker waited for that attempt's end forever.
    const { reporter, following } = await setup();
    const loc = await heldWeb();
    const earlier = () => new Date(Date.now() - 3_600_000);
    await recordOperation(
      kube,
      loc,
      { token: "ended-before", commit: "e".repeat(40), targets: [{ uid: "u", reason: "CatchUp" }] },
      { now: earlier },
    );
    await completeOperation(kube, loc, "ended-before", { phase: "Succeeded" }, { now: earlier });
    await until(async () => {
      reconciler!.schedule(0);
      return reporter.reports.some((r) => r.token === "ended-before");
    }, "the end reported again");
    expect(reporter.reports.filter((r) => r.token === "ended-before")).toMatchObject([
      {
        phase: "Succeeded",
        commit: "e".repeat(40),
        branchKey: `${namespace}/repo:git.example/org/repo@main`,
      },
    ]);
    // Remembered as ended here: the dead process's stalled job is not reported lost (seed 60068).
    expect(following.endedAs("ended-before")).toBe("Succeeded");

    // Completed by this process (after it started): its executor reported it already.
    await recordOperation(kube, loc, {
      token: "ended-here",
      commit: "f".repeat(40),
      targets: [{ uid: "u", reason: "CatchUp" }],
    });
    await completeOperation(kube, loc, "ended-here", { phase: "Succeeded" });
    const before = reconciler!.passCount();
    await until(async () => {
      reconciler!.schedule(0);
      return reconciler!.passCount() >= before + 3;
    }, "three passes");
    expect(reporter.reports.filter((r) => r.token === "ended-before")).toHaveLength(1);
    expect(reporter.reports.filter((r) => r.token === "ended-here")).toEqual([]);
  });

  it("an operation this process follows is left alone", async () => {
    const { following } = await setup({ unfollowedGraceMs: 50 });
    const loc = await heldWeb();
    const unfollow = following.follow("mine", `${namespace}/web`);
    await recordOperation(kube, loc, {
      token: "mine",
      commit: "e".repeat(40),
      targets: [{ uid: "u", reason: "CatchUp" }],
    });
    const before = reconciler!.passCount();
    await until(async () => {
      reconciler!.schedule(0);
      return reconciler!.passCount() >= before + 3;
    }, "three passes");
    expect((await readOperation(kube, loc))?.phase).toBe("Requested");
    unfollow();
  });

  it("a restarted reconciler judges a held claim only once it has listed everything: it is never handed back", async () => {
    const { state } = await setup();
    await heldWeb();
    await reconciler!.stop();
    // A fresh start: its informers list again, and the GitTargets' list lands last.
    expect(kube.informers.running()).toEqual([]);
    server.faults.latency(300, { method: "GET", pathPrefix: "/apis/applygate.dev/v1alpha1/gittargets" });
    let again: Awaited<ReturnType<typeof setup>>;
    try {
      again = await setup({ again: true });
    } finally {
      server.faults.latency(0);
    }
    await reconciler!.whenIdle();
    const handBacks = [...state.calls, ...again.state.calls].filter((c) =>
      c.startsWith(`handBack:${namespace}/`),
    );
    expect(handBacks).toEqual([]);
    expect(again.state.calls).toContain(`hold:${namespace}/web`);
    expect((await cond("web", "InControl"))?.status).toBe("True");
  });

  it("a reconcile that fails is retried after its own backoff, not at the next safety-net pass", async () => {
    const { state } = await setup({ resyncMs: 600_000, retryBackoffMs: () => 20 });
    state.holdFailures = 3;
    await named("web", "t1");
    await until(async () => (await cond("web", "InControl"))?.status === "True", "held after the failures");
    expect(state.holdFailures).toBe(0);
  });

  it("an operation's end is an Event on the claim: Normal OperationSucceeded, Warning OperationFailed", async () => {
    const { events, following } = await setup();
    const loc = await heldWeb();
    const ends = () =>
      events.events.filter((e) => e.regarding.namespace === namespace && e.action === "Apply");
    const run = async (token: string, phase: "Succeeded" | "Failed", outcome?: string) => {
      const unfollow = following.follow(token, `${namespace}/web`);
      await recordOperation(kube, loc, {
        token,
        commit: "c".repeat(40),
        targets: [{ uid: "u", reason: "CatchUp" }],
      });
      await completeOperation(kube, loc, token, {
        phase,
        ...(outcome ? { outcome, message: "the build failed" } : {}),
      });
      unfollow({ ended: true });
    };
    await run("ok-1", "Succeeded");
    await until(async () => ends().length === 1, "the Succeeded Event");
    await run("bad-1", "Failed", "BuildFailed");
    await until(async () => ends().length === 2, "the Failed Event");
    expect(ends()).toEqual([
      {
        type: "Normal",
        reason: "OperationSucceeded",
        action: "Apply",
        note: `operation ok-1 for commit ${"c".repeat(40)} succeeded`,
        regarding: expect.objectContaining({ kind: "FluxClaim", namespace, name: "web" }),
      },
      {
        type: "Warning",
        reason: "OperationFailed",
        action: "Apply",
        note: `operation bad-1 for commit ${"c".repeat(40)} failed (BuildFailed: the build failed)`,
        regarding: expect.objectContaining({ kind: "FluxClaim", namespace, name: "web" }),
      },
    ]);
    // A status write that leaves the completed operation as it is announces nothing again.
    await kube.mergePatch(RESOURCES.fluxClaim, namespace, "web", {
      metadata: { labels: { touched: "yes" } },
    });
    const before = reconciler!.passCount();
    await until(async () => reconciler!.passCount() > before, "a reconcile after the change");
    await reconciler!.whenIdle();
    expect(ends()).toHaveLength(2);
  });

  describe("who may hold an applier in another namespace", () => {
    it("without an ApplierGrant there: Ready=False ApplierNamespaceNotAllowed, nothing held, no finalizer", async () => {
      const { state } = await setup({ grant: false });
      await named("web", "t1");
      const ready = await condSays("web", "Ready", "ApplierNamespaceNotAllowed");
      expect(ready.status).toBe("False");
      expect(ready.message).toContain(`flux-system/web-${namespace}`);
      expect(ready.message).toContain(namespace);
      expect((await cond("web", "InControl"))?.status).toBe("False");
      expect((await get("web"))?.metadata.finalizers ?? []).not.toContain(CLAIM_FINALIZER);
      expect(state.calls.filter((c) => c.includes(`${namespace}/`))).toEqual([]);
    });

    it("a grant for another kind, another namespace or another applier grants nothing", async () => {
      const { state } = await setup({ grant: false });
      await server.applyYaml(`apiVersion: applygate.dev/v1alpha1
kind: ApplierGrant
metadata: {name: other-kind-${namespace}, namespace: flux-system}
spec: {from: [{namespace: ${namespace}, kind: ArgoCDClaim}]}
`);
      await server.applyYaml(grantYaml(`other-ns-${namespace}`, `not-${namespace}`));
      await server.applyYaml(grantYaml(`other-applier-${namespace}`, namespace, "someone-else"));
      await named("web", "t1");
      await until(
        async () => (await cond("web", "Ready"))?.reason === "ApplierNamespaceNotAllowed",
        "refused",
      );
      const before = reconciler!.passCount();
      await until(async () => {
        reconciler!.schedule(0);
        return reconciler!.passCount() >= before + 2;
      }, "two more passes");
      expect(state.calls.filter((c) => c.includes(`${namespace}/`))).toEqual([]);
    });

    it("the grant made, the claim holds; the grant removed, the applier is handed back as on deletion", async () => {
      const { state, events } = await setup({ grant: false });
      await named("web", "t1");
      await until(
        async () => (await cond("web", "Ready"))?.reason === "ApplierNamespaceNotAllowed",
        "refused",
      );
      await server.applyYaml(grantYaml(`grant-${namespace}`, namespace, `web-${namespace}`));
      await until(async () => (await cond("web", "InControl"))?.status === "True", "held once granted");
      expect((await get("web"))?.metadata.finalizers).toContain(CLAIM_FINALIZER);
      await kube.delete(RESOURCES.applierGrant, "flux-system", `grant-${namespace}`);
      await until(
        async () => !((await get("web"))?.metadata.finalizers ?? []).includes(CLAIM_FINALIZER),
        "handed back",
      );
      expect(state.calls).toContain(`handBack:${namespace}/web`);
      expect(events.events.filter((e) => e.reason === "Released").length).toBeGreaterThan(0);
      expect(await cond("web", "Ready")).toMatchObject({
        status: "False",
        reason: "ApplierNamespaceNotAllowed",
      });
    });
  });
});
