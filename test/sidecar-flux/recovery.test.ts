/**
 * Restart recovery and the graceful stop: a sidecar process killed between the resume and the
 * suspend leaves the operation recorded on the claim; a new one completes that same operation by
 * its recorded tokens and leaves the Kustomization suspended. A graceful stop suspends first.
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import type { Attempt } from "../../queue/contract.js";
import { fluxReadyOf, fluxSpecField, fluxStatusField, RESOURCES } from "../../queue/kube/index.js";
import type { Operation } from "../../sidecar/operation-record.js";
import { fileWorld } from "../support/file-world.js";
import { recorder } from "../support/sidecar-world.js";
import { adopted, DEFAULT_TEST_KNOBS, type Scene, startWorld, until } from "./harness.js";

// Slow builds, so a kill lands between the resume and the suspend.
const world = fileWorld(() => startWorld({ ...DEFAULT_TEST_KNOBS, buildMs: 1500 }));

/** A new process's restart recovery of `operation`: the phases it reports, once it returns. */
async function recovered(s: Scene, operation: Operation, branchKey: string): Promise<string[]> {
  const r = recorder();
  await s.kind.executor.recover!(
    { claim: { type: RESOURCES.fluxClaim, ...s.claim }, applier: s.ks, operation, branchKey },
    r.report,
    new AbortController().signal,
  );
  return r.phases();
}

/** Runs the attempt in a child sidecar process, SIGKILLed once it reported Running. */
async function killedAtRunning(attempt: Attempt): Promise<void> {
  const kc = world.api.kubeConfig();
  const child = spawn(
    process.execPath,
    ["--import", "tsx", fileURLToPath(new URL("./child.ts", import.meta.url))],
    {
      env: {
        ...process.env,
        APPLYGATE_SERVER: kc.getCurrentCluster()!.server,
        APPLYGATE_TOKEN: kc.getCurrentUser()!.token!,
        APPLYGATE_ATTEMPT: JSON.stringify(attempt),
      },
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  const seen: string[] = [];
  const exited = new Promise<void>((r) => child.on("exit", () => r()));
  await new Promise<void>((resolve, reject) => {
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk: string) => {
      for (const line of chunk.split("\n").filter(Boolean)) {
        const { phase } = JSON.parse(line) as { phase: string };
        seen.push(phase);
        if (phase === "Running") {
          child.kill("SIGKILL");
          resolve();
        }
      }
    });
    child.on("exit", () => reject(new Error(`the child ended before Running: ${seen.join(",")}`)));
  });
  await exited;
  expect(seen).toEqual(["Requested", "Running"]);
}

describe.sequential("restart recovery", () => {
  it("a sidecar killed mid-apply: the next one completes the same operation and leaves it suspended", async () => {
    const s = await adopted(world);
    const commit = await s.pushConfig("recovered");
    const attempt = s.attempt(commit);
    await killedAtRunning(attempt);
    const recorded = (await s.operation())!;
    expect(recorded).toMatchObject({ token: attempt.token, phase: "Running" });
    expect(fluxSpecField(await s.readKs(), "suspend")).toBe(false); // resumed, nobody suspended it

    // The new process follows the same operation by its recorded tokens.
    const phases = await recovered(s, recorded, attempt.branchKey);
    expect(phases).toEqual(["Settling", "Succeeded"]);
    const done = (await s.operation())!;
    expect(done).toMatchObject({ token: attempt.token, phase: "Succeeded", commit });
    const ks = await s.readKs();
    expect(fluxSpecField(ks, "suspend")).toBe(true);
    expect(fluxStatusField(ks, "lastHandledReconcileAt")).toBe(done.suspendToken);
    expect(await s.configValue()).toBe("recovered");
    expect(world.sim.appliedRevisions(s.ks).filter((r) => r.endsWith(commit))).toHaveLength(1);
  });

  it("a sidecar killed mid-apply, the next one starting while a later reconcile runs: it waits for that reconcile's end (real Flux, 2 runs in 4)", async () => {
    // A 10 min interval is 600 ms at this world's scale: reconciles follow each other closely.
    const s = await adopted(world, { ksSpec: { interval: "10m" } });
    const commit = await s.pushConfig("reconciling");
    const attempt = s.attempt(commit);
    await killedAtRunning(attempt);
    const recorded = (await s.operation())!;
    // Left resumed, the Kustomization reconciles on its interval: the reconcile that handled the
    // resume's token has ended, and the next one, holding the same token, runs (Ready Unknown).
    await until(async () => {
      const ks = await s.readKs();
      return (
        fluxStatusField(ks, "lastHandledReconcileAt") === recorded.resumeToken &&
        fluxReadyOf(ks)?.status === "Unknown"
      );
    }, "a later reconcile running, the resume's token handled");

    const phases = await recovered(s, recorded, attempt.branchKey);
    expect(phases).toEqual(["Settling", "Succeeded"]);
    expect(await s.operation()).toMatchObject({ token: attempt.token, phase: "Succeeded", commit });
    expect(fluxSpecField(await s.readKs(), "suspend")).toBe(true);
    expect(await s.configValue()).toBe("reconciling");
  });

  it("an apply that landed while no sidecar watched is reported by the next one's window (soak seed 152052)", async () => {
    const s = await adopted(world);
    const commit = await s.pushConfig("unwatched");
    const attempt = s.attempt(commit);
    await killedAtRunning(attempt);
    // The apply lands while no sidecar process runs: no watch saw its write.
    await until(
      async () => ((await s.configValue()) === "unwatched" ? true : undefined),
      "the apply to land unwatched",
    );
    const cm = await world.kube.core.readNamespacedConfigMap({ namespace: s.ns, name: "app-config" });
    const phases = await recovered(s, (await s.operation())!, attempt.branchKey);
    expect(phases.at(-1)).toBe("Succeeded");
    // The next process's window judged the object as listed: the applier's write, in the window.
    const write = await until(
      async () => s.reports.find((x) => x.type === "applierWrite" && x.token === attempt.token),
      "the unwatched apply's write reported",
    );
    expect(write).toMatchObject({
      manager: "kustomize-controller",
      object: { kind: "ConfigMap", name: "app-config", namespace: s.ns },
      resourceVersion: cm.metadata?.resourceVersion,
    });
  });

  it("a graceful stop suspends what it resumed; the next process completes the operation", async () => {
    const s = await adopted(world);
    const commit = await s.pushConfig("graceful");
    const attempt = s.attempt(commit);
    const stop = new AbortController();
    const r = recorder();
    const running = s.kind.executor.execute(
      attempt,
      async (p, e) => {
        await r.report(p, e);
        if (p === "Running") stop.abort();
      },
      stop.signal,
    );
    await expect(running).rejects.toThrow();
    expect(r.phases()).toEqual(["Requested", "Running"]);
    expect(fluxSpecField(await s.readKs(), "suspend")).toBe(true);
    const recorded = (await s.operation())!;
    expect(recorded).toMatchObject({ phase: "Settling" });
    expect(recorded.suspendToken).toBeDefined();
    expect((await recovered(s, recorded, attempt.branchKey)).at(-1)).toBe("Succeeded");
    expect(await s.configValue()).toBe("graceful");
  });

  it("recorded but never resumed: suspended, and the operation ends Failed", async () => {
    const s = await adopted(world);
    const op: Operation = {
      token: "never-resumed",
      phase: "Requested",
      commit: "a".repeat(40),
      targets: [],
      requestedAt: new Date().toISOString(),
      resumeToken: "T1-never-written",
    };
    await s.recordOperation(op);
    const phases = await recovered(s, op, `${s.url}@main`);
    expect(phases.at(-1)).toBe("Failed");
    expect(await s.operation()).toMatchObject({ phase: "Failed", outcome: "NotResumed" });
    const ks = await s.readKs();
    expect(fluxSpecField(ks, "suspend")).toBe(true);
    expect(fluxStatusField(ks, "lastHandledReconcileAt")).toBe((await s.operation())?.suspendToken);
  });
});
