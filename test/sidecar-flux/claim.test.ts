/**
 * The FluxClaim lifecycle against fluxsim: adopt, the refusals to hold, somebody else's resume,
 * an operation nobody follows, hand-back (released, or left suspended as it was), a shared
 * GitRepository, and the window observer's reports.
 */
import { describe, expect, it } from "vitest";
import { fluxSpecField, readFluxClaim } from "../../queue/kube/index.js";
import { judgeEligibility } from "../../sidecar/claims/eligibility.js";
import { FluxClient } from "../../sidecar/flux/client.js";
import { FluxExecutor } from "../../sidecar/flux/executor.js";
import { GIT_REPOSITORY } from "../../sidecar/flux/resources.js";
import { appliesSuspend } from "../../sidecar/flux/suspend-owner.js";
import { fileWorld } from "../support/file-world.js";
import { unrecordedChecks } from "../support/safety-checks.js";
import { adopted, configMap, type Scene, scene, startWorld, until } from "./harness.js";

const world = fileWorld(() => startWorld());

const statusOf = async (s: Scene) => {
  const r = readFluxClaim(await s.readClaim());
  return r.ok ? r.value.status : undefined;
};

describe.concurrent("holding a Kustomization", () => {
  it("adopts: suspends by server-side apply under applygate, InControl=True (Suspended) once handled", async () => {
    const s = await adopted(world);
    const ks = await s.readKs();
    expect(fluxSpecField(ks, "suspend")).toBe(true);
    expect(appliesSuspend(ks, "applygate")).toBe(true);
    const st = await statusOf(s);
    expect(st?.previousSuspendState).toBe("Resumed");
    expect(st?.conditions?.find((c) => c.type === "InControl")).toMatchObject({
      status: "True",
      reason: "Suspended",
    });
    expect(s.events.find((e) => e.reason === "Adopted")).toMatchObject({ type: "Normal", action: "Suspend" });
    // Held: a new commit fetched by the source is not applied.
    const applied = world.sim.appliedRevisions(s.ks).length;
    const commit = await s.pushConfig("2");
    await s.fetch("fetch", commit);
    await world.sim.idle();
    expect(world.sim.appliedRevisions(s.ks).length).toBe(applied);
    expect(await s.configValue()).toBe("1");
  });

  it("refuses to hold a Kustomization whose spec.suspend another manager applies, naming it", async () => {
    const s = await scene(world);
    await s.applyKs({ suspend: false }, "parent-kustomization");
    const claim = await s.readClaim();
    const r = await s.kind.controller.checkExternal(claim, s.ks, await s.ctx());
    expect(r).toMatchObject({ configured: false, reason: "SuspendOwnedElsewhere" });
    expect(r.configured === false && r.message).toContain("parent-kustomization");
    // A flux resume (an Update) is no refusal.
    const t = await scene(world);
    await t.patchKs({ spec: { suspend: false } }, "flux");
    expect(await t.kind.controller.checkExternal(await t.readClaim(), t.ks, await t.ctx())).toEqual({
      configured: true,
    });
  });

  it("a source on another repository or branch is SourceMismatch; one pinned to a tag is not supported", async () => {
    const s = await scene(world);
    const claim = await s.readClaim();
    const source = await s.kind.controller.source(claim, s.ks, await s.ctx());
    expect(source).toEqual({ state: "Known", url: s.url, branch: "main" });
    const target = {
      uid: "u",
      namespace: s.ns,
      name: "gt",
      deleting: false,
      branch: "release",
      providerRef: { name: "gp" },
      claimRef: { kind: "FluxClaim", name: "claim" },
    };
    const e = judgeEligibility({
      claim: { kind: "FluxClaim", namespace: s.ns, name: "claim" },
      targets: [target],
      provider: () => ({ namespace: s.ns, name: "gp", url: s.url }),
      source,
    });
    expect(e).toMatchObject({ state: "Refused", reason: "SourceMismatch" });
    await world.kube.mergePatch(GIT_REPOSITORY, s.ns, "repo", {
      spec: { ref: { branch: "main", tag: "v1" } },
    });
    expect(await s.kind.controller.source(claim, s.ks, await s.ctx())).toMatchObject({
      state: "Unsupported",
      reason: "SourceNotABranch",
    });
  });

  it("reads a sourceRef with an empty namespace as in the Kustomization's, as Flux does", async () => {
    const s = await scene(world);
    await s.patchKs(
      { spec: { sourceRef: { kind: "GitRepository", name: "repo", namespace: "" } } },
      "tenant",
    );
    const source = await s.kind.controller.source(await s.readClaim(), s.ks, await s.ctx());
    expect(source).toEqual({ state: "Known", url: s.url, branch: "main" });
  });

  it("somebody else's resume is suspended again, recorded Unresolved and completed, with an Event every time", async () => {
    const s = await adopted(world);
    for (const round of [1, 2]) {
      const commit = await s.pushConfig(`r${round}`);
      await s.fetch(`fetch-${round}`, commit);
      // flux resume: a merge patch of spec.suspend=false.
      await s.patchKs({ spec: { suspend: false } }, "flux");
      const claim = await s.readClaim();
      const r = await s.kind.controller.hold(claim, s.ks, await s.ctx());
      expect(r.conditions.find((c) => c.type === "InControl")).toMatchObject({
        status: "True",
        reason: "Applying",
      });
      const op = await s.operation();
      expect(op).toMatchObject({ phase: "Unresolved" });
      expect(op?.resumeToken).toBeUndefined();
      // Followed to its end: completed once the suspend is handled, with what the resume applied.
      const done = await until(async () => {
        const o = await s.operation();
        return o && o.phase !== "Unresolved" && o;
      }, "the external resume's record to complete");
      // Whether Flux started a reconcile before our suspend landed is its own timing: a resume it
      // acted on completes Succeeded with the commit it applied, one it never acted on Failed.
      expect(["Succeeded", "Failed"]).toContain(done.phase);
      if (done.phase === "Succeeded") expect(done.commit).toBe(commit);
      expect(fluxSpecField(await s.readKs(), "suspend")).toBe(true);
      expect(s.events.filter((e) => e.reason === "ClaimedResourceReconciled")).toHaveLength(round);
    }
  });

  it("an operation nobody follows is suspended, with a Warning OperationUnfollowed", async () => {
    const s = await adopted(world);
    const op = {
      token: "orphan",
      phase: "Running" as const,
      commit: "x",
      targets: [],
      requestedAt: new Date().toISOString(),
      resumeToken: "T1",
    };
    await s.recordOperation(op);
    await s.patchKs({ spec: { suspend: false } }, "flux");
    const ctx = await s.ctx();
    const settled = await until(async () => {
      const claim = await s.readClaim();
      return (await s.kind.controller.settleUnfollowed!(claim, s.ks, op, ctx)) || undefined;
    }, "the unfollowed operation to be made safe");
    expect(settled).toBe(true);
    expect(fluxSpecField(await s.readKs(), "suspend")).toBe(true);
    expect(s.events.find((e) => e.reason === "OperationUnfollowed")).toMatchObject({ type: "Warning" });
  });
});

describe.concurrent("handing back", () => {
  it("releases spec.suspend, so Flux applies on its own again", async () => {
    const s = await adopted(world);
    const commit = await s.pushConfig("back");
    const r = await until(async () => {
      const res = await s.kind.controller.handBack(await s.readClaim(), s.ks, await s.ctx());
      if (res.status) await s.writeResult("claim", { status: res.status });
      return res.done && res;
    }, "the hand-back");
    expect(r.done).toBe(true);
    const ks = await s.readKs();
    expect(fluxSpecField(ks, "suspend")).toBeFalsy();
    expect(appliesSuspend(ks, "applygate")).toBe(false);
    expect((await statusOf(s))?.previousSuspendState).toBeUndefined();
    // The reconciler records the one Event of the outcome, its note this condition's message.
    expect(r.conditions?.find((c) => c.type === "InControl")).toMatchObject({
      status: "False",
      reason: "Released",
      message: expect.stringMatching(/Flux applies it on its own again/),
    });
    expect(s.events.filter((e) => e.action === "Release")).toEqual([]);
    // Flux owns it again: the tip gets applied by Flux itself.
    await s.fetch("after-release");
    await until(async () => (await s.configValue()) === "back", "Flux to apply the tip");
    expect(world.sim.appliedRevisions(s.ks).at(-1)).toBe(`main@sha1:${commit}`);
  });

  it("suspends an apply in flight first, then releases", async () => {
    const s = await adopted(world);
    await s.patchKs({ spec: { suspend: false } }, "flux");
    const first = await s.kind.controller.handBack(await s.readClaim(), s.ks, await s.ctx());
    expect(first.done).toBe(false);
    expect(first.conditions?.find((c) => c.type === "InControl")).toMatchObject({
      status: "False",
      reason: "Releasing",
    });
    expect(fluxSpecField(await s.readKs(), "suspend")).toBe(true);
    const done = await until(async () => {
      const res = await s.kind.controller.handBack(await s.readClaim(), s.ks, await s.ctx());
      return res.done && res;
    }, "the hand-back");
    expect(done.done).toBe(true);
  });

  it("a Kustomization suspended before the claim held it stays suspended (previousSuspendState: Suspended)", async () => {
    const s = await adopted(world, { suspendedBefore: true });
    expect((await statusOf(s))?.previousSuspendState).toBe("Suspended");
    const r = await until(async () => {
      const res = await s.kind.controller.handBack(await s.readClaim(), s.ks, await s.ctx());
      return res.done && res;
    }, "the hand-back");
    expect(r.done).toBe(true);
    expect(fluxSpecField(await s.readKs(), "suspend")).toBe(true);
    await world.sim.idle();
    expect(world.sim.appliedRevisions(s.ks)).toEqual([]);
  });

  it("with a successor in line, leaves it suspended for that one", async () => {
    const s = await adopted(world);
    const r = await s.kind.controller.handBack(
      await s.readClaim(),
      s.ks,
      await s.ctx({ successor: `${s.ns}/next` }),
    );
    expect(r.done).toBe(true);
    expect(fluxSpecField(await s.readKs(), "suspend")).toBe(true);
  });
});

describe.concurrent("a shared GitRepository and the apply window", () => {
  it("applies only the consumer asked, though the source fetched a commit both read", async () => {
    const s = await adopted(world, { extra: { infra: "infra" } });
    await s.adopt("infra-claim");
    const infra = { namespace: s.ns, name: "infra" };
    const infraApplied = world.sim.appliedRevisions(infra).length;
    const commit = await s.push({
      "apps/cm.yaml": configMap("app-config", "2"),
      "infra/cm.yaml": configMap("infra-config", "2"),
    });
    const r = await s.run(s.attempt(commit));
    expect(r.last.phase).toBe("Succeeded");
    await world.sim.idle();
    expect(await s.configValue()).toBe("2");
    expect(await s.configValue("infra-config")).toBe("1");
    expect(world.sim.appliedRevisions(infra).length).toBe(infraApplied);
    expect(fluxSpecField(await s.readKs("infra"), "suspend")).toBe(true);
  });

  it("resumes only once the window is open and watching", async () => {
    const s = await adopted(world);
    const commit = await s.pushConfig("watched");
    const seen: string[] = [];
    const executor = new FluxExecutor({
      client: new FluxClient(world.kube, { log: world.log, pollMs: 50 }),
      log: world.log,
      events: world.events,
      now: world.now,
      checks: unrecordedChecks(world.kube),
      window: {
        // A slow list: the resume must wait for it, or the apply could land before the watch.
        async open() {
          await new Promise((r) => setTimeout(r, 300));
          seen.push(`opened, suspend ${fluxSpecField(await s.readKs(), "suspend")}`);
        },
        close: () => seen.push("closed"),
      },
    });
    const phases: string[] = [];
    await executor.execute(
      s.attempt(commit),
      async (phase) => {
        phases.push(phase);
      },
      new AbortController().signal,
    );
    expect(phases.at(-1)).toBe("Succeeded");
    expect(seen).toEqual(["opened, suspend true", "closed"]);
  });

  it("reports kustomize-controller's own writes while the window is open, with time and resourceVersion", async () => {
    const s = await adopted(world);
    const commit = await s.pushConfig("w");
    const attempt = s.attempt(commit);
    const r = await s.run(attempt);
    expect(r.last.phase).toBe("Succeeded");
    const write = await until(
      async () => s.reports.find((x) => x.type === "applierWrite"),
      "an applier-write report",
    );
    const cm = await world.kube.core.readNamespacedConfigMap({ namespace: s.ns, name: "app-config" });
    expect(write).toMatchObject({
      token: attempt.token,
      manager: "kustomize-controller",
      object: { kind: "ConfigMap", name: "app-config", namespace: s.ns },
      resourceVersion: cm.metadata?.resourceVersion,
    });
    if (write.type === "applierWrite") expect(Date.parse(write.writtenAt)).not.toBeNaN();
    // An edit by somebody else in the window is not the applier's.
    await world.editConfigMap(s.ns, "app-config", { v: "edited" });
    // An absence, so it is waited out: the observer would report the edit within this.
    await new Promise((res) => setTimeout(res, 150));
    expect(s.reports.filter((x) => x.type === "applierWrite")).toHaveLength(1);
    await until(
      async () => (s.kind.windowObserver.openWindows().length === 0 ? true : undefined),
      "the window to close",
    );
  });
});
