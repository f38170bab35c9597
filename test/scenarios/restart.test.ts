/**
 * A restart of each process mid-apply: the worker, the Flux sidecar and the Argo CD sidecar are
 * each stopped while an apply runs and started again. The apply ends Succeeded, the cluster holds
 * the pushed value, and no second apply of the commit is started.
 */
import { afterEach, describe, expect, it } from "vitest";
import { appliedCommits, clusterValue, foreignPush, readClaim, until } from "../playground/actors.js";
import type { DemoApp } from "../playground/demo.js";
import { operationsOf, type Scene, startScene, unique } from "./harness.js";

const phaseOf = async (s: Scene, app: DemoApp) =>
  (await readClaim(s.a, app))?.status?.operation as { phase?: string; commit?: string } | undefined;

describe("a restart mid-apply", () => {
  let s: Scene | undefined;
  afterEach(async () => {
    await s?.stop();
    s = undefined;
  });

  for (const [process, app] of [
    ["worker", "flux"],
    ["flux sidecar", "flux"],
    ["argocd sidecar", "argocd"],
  ] as const) {
    it(`of the ${process} ends the apply once`, async () => {
      // Slow applies, so the restart falls inside one.
      s = await startScene({
        timers: {
          flux: { perObjectApplyMs: 1, buildMs: 1500 },
          argo: { refreshIntervalMs: 3_600_000, syncDelayMs: 1500 },
        },
      });
      const scene = s;
      const value = `pushed-${unique()}`;
      const commit = await foreignPush(scene.a, app, value);
      await until(async () => {
        const op = await phaseOf(scene, app);
        return op?.commit === commit && op.phase === "Running";
      }, "the apply to run");
      if (process === "worker") {
        await scene.a.stopWorker();
        await scene.a.startWorker();
      } else {
        const kind = app === "flux" ? "flux" : "argocd";
        await scene.a.stopSidecar(kind);
        await scene.a.startSidecar(kind);
      }
      await until(
        async () => (await clusterValue(scene.a, app)).greeting === value,
        "the pushed value on the cluster",
      );
      await until(async () => {
        const op = await phaseOf(scene, app);
        return op?.commit === commit && op.phase === "Succeeded";
      }, "the operation to end Succeeded");
      // The claim's status is written before the report travels through the queue to the
      // observer: wait for the report too, or the trail below can be read a moment early.
      await until(
        () =>
          operationsOf(scene, app).some((o) => o.attempt.commit === commit && o.phases.includes("Succeeded")),
        "the Succeeded report",
      );
      const ops = operationsOf(scene, app).filter((o) => o.attempt.commit === commit);
      const trail = JSON.stringify(ops.map((o) => [o.attempt.token, o.phases]));
      // One attempt for the commit, the one the restart interrupted: followed to its end by the
      // restarted process (from the claim's record), never sent or started a second time.
      expect(ops.length, trail).toBe(1);
      expect(ops[0]?.phases.at(-1), trail).toBe("Succeeded");
      expect(
        ops[0]?.phases.filter((p) => p === "Succeeded"),
        trail,
      ).toHaveLength(1);
      expect(
        appliedCommits(scene.a, app).filter((c) => c === commit),
        trail,
      ).toHaveLength(1);
    });
  }

  it("of the worker just after it sent an attempt, before the Flux sidecar recorded it: the next worker follows that attempt and sends none", async () => {
    s = await startScene({ timers: { flux: { perObjectApplyMs: 1 } } });
    const scene = s;
    // The sidecar records an operation once the GitRepository fetched its commit: 4 s here, longer
    // than the worker's restart takes, so the next worker reads the claim before the record lands
    // (test/worker/decisions.test.ts makes that order certain; here it is as deployed).
    scene.a.flux.knobs.fetchLatencyMs = 4_000;
    const value = `pushed-${unique()}`;
    const commit = await foreignPush(scene.a, "flux", value);
    await until(
      () => operationsOf(scene, "flux").some((o) => o.attempt.commit === commit),
      "the attempt sent",
    );
    expect((await phaseOf(scene, "flux"))?.commit).not.toBe(commit);
    await scene.a.stopWorker();
    await scene.a.startWorker();
    await until(async () => {
      const op = await phaseOf(scene, "flux");
      return op?.commit === commit && op.phase === "Succeeded";
    }, "the operation to end Succeeded");
    await until(
      () =>
        operationsOf(scene, "flux").some(
          (o) => o.attempt.commit === commit && o.phases.includes("Succeeded"),
        ),
      "the Succeeded report",
    );
    expect((await clusterValue(scene.a, "flux")).greeting).toBe(value);
    const ops = operationsOf(scene, "flux").filter((o) => o.attempt.commit === commit);
    const trail = JSON.stringify(ops.map((o) => [o.attempt.token, o.phases]));
    expect(ops.length, trail).toBe(1);
    expect(ops[0]?.phases, trail).not.toContain("RequestFailed");
    expect(
      appliedCommits(scene.a, "flux").filter((c) => c === commit),
      trail,
    ).toHaveLength(1);
    const history = (await readClaim(scene.a, "flux"))?.status?.history as Array<{ commit: string }>;
    expect(history.filter((h) => h.commit === commit)).toHaveLength(1);
  });
});
