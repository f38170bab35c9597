/**
 * The Flux operation against fluxsim, the simulated API server and a real Git server: one test
 * per outcome row the simulated controllers can produce, and each way an attempt starts nothing.
 */
import { describe, expect, it } from "vitest";
import { claimStatusOf, fluxSpecField, fluxStatusField, RESOURCES } from "../../queue/kube/index.js";
import type { SafetyChecks } from "../../sidecar/applier-kind.js";
import { fileWorld } from "../support/file-world.js";
import { adopted, scene, startWorld, until } from "./harness.js";

const world = fileWorld(() => startWorld());

describe.concurrent("one operation", () => {
  it("fetches the commit, resumes once, applies it, suspends again and completes Succeeded", async () => {
    const s = await adopted(world);
    const commit = await s.pushConfig("2");
    const before = world.sim.appliedRevisions(s.ks).length;
    const r = await s.run(s.attempt(commit));
    expect(r.phases).toEqual(["Requested", "Running", "Settling", "Succeeded"]);
    expect(r.last).toMatchObject({ revisionMismatch: false });
    expect(await s.configValue()).toBe("2");
    const ks = await s.readKs();
    expect(fluxSpecField(ks, "suspend")).toBe(true);
    const op = await s.operation();
    expect(op).toMatchObject({ phase: "Succeeded", commit, outcome: "Applied" });
    expect(fluxStatusField(ks, "lastHandledReconcileAt")).toBe(op?.suspendToken);
    expect(claimStatusOf(await s.readClaim())?.lastAppliedCommit).toBe(commit);
    // Exactly one apply, of this commit.
    expect(world.sim.appliedRevisions(s.ks).slice(before)).toEqual([`main@sha1:${commit}`]);
  });

  it("a build failure is Failed with Flux's reason, and left suspended (Flux's own retry held off)", async () => {
    // retryInterval 20m is 1.2 s under fluxsim's scale (still far longer than the suspend takes):
    // unsuspended, Flux would retry (and, the failure being one-off, apply) in the wait below.
    const s = await adopted(world, { ksSpec: { retryInterval: "20m" } });
    const commit = await s.pushConfig("3");
    world.sim.failNextApply(s.ks, "build");
    const before = world.sim.appliedRevisions(s.ks).length;
    const r = await s.run(s.attempt(commit));
    expect(r.last).toMatchObject({ phase: "Failed", reason: "BuildFailed" });
    expect(fluxSpecField(await s.readKs(), "suspend")).toBe(true);
    expect(await s.operation()).toMatchObject({ phase: "Failed", outcome: "BuildFailed" });
    // An absence, so it is waited out: four retry intervals.
    await new Promise((r) => setTimeout(r, 4 * 1200));
    expect(world.sim.appliedRevisions(s.ks).slice(before)).toEqual([]);
    expect(await s.configValue()).toBe("1");
  });

  it("an attempt whose GitTarget was recreated is Dropped: nothing resumed, the record withdrawn", async () => {
    const s = await adopted(world);
    const commit = await s.pushConfig("4");
    const attempt = s.attempt(commit);
    const t = (await world.kube.get(RESOURCES.gitTarget, s.ns, "target"))!;
    await world.kube.delete(RESOURCES.gitTarget, s.ns, "target");
    await world.kube.custom.createNamespacedCustomObject({
      ...RESOURCES.gitTarget,
      namespace: s.ns,
      body: {
        apiVersion: t.apiVersion,
        kind: t.kind,
        metadata: { name: "target", namespace: s.ns },
        spec: t.spec,
      },
    });
    const before = world.sim.appliedRevisions(s.ks).length;
    const r = await s.run(attempt);
    expect(r.last).toMatchObject({ phase: "Dropped", reason: "NoTargetStands" });
    expect(r.phases).not.toContain("Running");
    expect(fluxSpecField(await s.readKs(), "suspend")).toBe(true);
    expect(await s.operation()).toBeUndefined();
    expect(world.sim.appliedRevisions(s.ks).slice(before)).toEqual([]);
    expect(await s.configValue()).toBe("1");
  });

  it("a failed health check after the apply is Failed (HealthCheckFailed)", async () => {
    const s = await adopted(world);
    const commit = await s.pushConfig("4");
    world.sim.failNextApply(s.ks, "health");
    const r = await s.run(s.attempt(commit));
    expect(r.last).toMatchObject({ phase: "Failed", reason: "HealthCheckFailed" });
    expect(fluxSpecField(await s.readKs(), "suspend")).toBe(true);
  });

  it("a dependency not ready is Failed with DependencyNotReady", async () => {
    const s = await adopted(world);
    await s.patchKs({ spec: { dependsOn: [{ name: "database" }] } }, "kubectl-edit");
    const commit = await s.pushConfig("5");
    const r = await s.run(s.attempt(commit));
    expect(r.last).toMatchObject({ phase: "Failed", reason: "DependencyNotReady" });
    expect(fluxSpecField(await s.readKs(), "suspend")).toBe(true);
    expect(await s.configValue()).toBe("1");
  });

  it("the source moved on between the recheck and the reconcile: Succeeded, the mismatch counted", async () => {
    const s = await adopted(world);
    const commit = await s.pushConfig("6");
    let calls = 0;
    let later = "";
    const isCurrent = async () => {
      // The last ask (after the record): somebody pushes and the source fetches it first.
      if (++calls === 2) {
        later = await s.pushConfig("7");
        await s.fetch("somebody", later);
      }
      return true;
    };
    (s.kind.executor as unknown as { d: { checks: SafetyChecks } }).d.checks.tip = isCurrent;
    const r = await s.run(s.attempt(commit));
    expect(r.last).toMatchObject({ phase: "Succeeded", revisionMismatch: true });
    expect(await s.configValue()).toBe("7");
  });
});

describe.concurrent("an attempt that starts nothing", () => {
  it("a commit that is no longer the tip is Stale, and nothing is recorded or resumed", async () => {
    const s = await adopted(world);
    const old = await s.pushConfig("10");
    await s.pushConfig("11");
    const applied = world.sim.appliedRevisions(s.ks).length;
    const r = await s.run(s.attempt(old));
    expect(r.phases).toEqual(["Stale"]);
    expect(await s.operation()).toBeUndefined();
    expect(world.sim.appliedRevisions(s.ks).length).toBe(applied);
  });

  it("a decision that went stale after the record withdraws it", async () => {
    const s = await adopted(world, { options: {} });
    const commit = await s.pushConfig("12");
    let calls = 0;
    (s.kind.executor as unknown as { d: { checks: SafetyChecks } }).d.checks.tip = async () => ++calls < 2;
    const r = await s.run(s.attempt(commit));
    expect(r.phases).toEqual(["Requested", "Stale"]);
    expect(await s.operation()).toBeUndefined();
    expect(fluxSpecField(await s.readKs(), "suspend")).toBe(true);
  });

  it("a Kustomization whose spec.suspend another manager applies is Rejected (SuspendOwnedElsewhere)", async () => {
    const s = await adopted(world);
    await s.applyKs({ suspend: true }, "helm-controller");
    const commit = await s.pushConfig("13");
    const r = await s.run(s.attempt(commit));
    expect(r.last).toMatchObject({ phase: "Rejected", reason: "SuspendOwnedElsewhere" });
  });

  it("a source on another branch is Rejected (SourceMismatch)", async () => {
    const s = await adopted(world);
    const commit = await s.pushConfig("14");
    const r = await s.run(s.attempt(commit, { branch: "release" }));
    expect(r.last).toMatchObject({ phase: "Rejected", reason: "SourceMismatch" });
  });

  it("a claim not in control is not resumed (RequestFailed)", async () => {
    const s = await scene(world);
    const commit = await s.pushConfig("15");
    const r = await s.run(s.attempt(commit));
    expect(r.last).toMatchObject({ phase: "RequestFailed", reason: "NotInControl" });
    expect(fluxSpecField(await s.readKs(), "suspend")).toBeFalsy();
  });

  it("another operation in flight refuses the record (RequestFailed), and nothing is resumed", async () => {
    const s = await adopted(world);
    await s.recordOperation({
      token: "other",
      phase: "Running",
      commit: "x",
      targets: [],
      requestedAt: new Date().toISOString(),
      resumeToken: "T",
    });
    const commit = await s.pushConfig("16");
    const r = await s.run(s.attempt(commit));
    expect(r.last).toMatchObject({ phase: "RequestFailed", reason: "OperationInFlight" });
    expect(fluxSpecField(await s.readKs(), "suspend")).toBe(true);
  });
});

// These hold fluxsim still or slow it down for everybody, so they run one at a time.
describe.sequential("with the controllers held still or slowed", () => {
  it("a reconcile that only handled the token (suspended before it ran) is Failed, NotReconciled", async () => {
    const s = await adopted(world);
    const commit = await s.pushConfig("8");
    // Fetch first, so the operation needs only the Kustomization controller.
    await s.fetch("prefetch", commit);
    // Hold the controllers still while the resume lands, and have somebody `flux suspend` it.
    let resumed!: Promise<unknown>;
    await world.restartSim(async () => {
      resumed = s.run(s.attempt(commit));
      await until(async () => fluxSpecField(await s.readKs(), "suspend") === false, "the resume");
      await s.patchKs({ spec: { suspend: true } }, "flux");
    });
    const r = (await resumed) as { last: { phase: string; reason?: string } };
    expect(r.last).toMatchObject({ phase: "Failed", reason: "NotReconciled" });
    expect(await s.configValue()).toBe("1");
  });

  it("not completed in time: Unresolved, suspended at once, followed on to its end", async () => {
    const s = await adopted(world, { options: { unresolvedAfterMs: 150 } });
    const commit = await s.pushConfig("9");
    world.sim.knobs.buildMs = 1200;
    try {
      const r = await s.run(s.attempt(commit));
      expect(r.phases).toEqual(["Requested", "Running", "Unresolved", "Succeeded"]);
      expect(s.events.some((e) => e.reason === "OperationUnresolved" && e.type === "Warning")).toBe(true);
      expect(await s.configValue()).toBe("9");
      expect(fluxSpecField(await s.readKs(), "suspend")).toBe(true);
    } finally {
      world.sim.knobs.buildMs = 0;
    }
  });
});
