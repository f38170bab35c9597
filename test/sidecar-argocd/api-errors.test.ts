/**
 * A transient API server error (a 500) on the claim's status writes while a sync runs: the sync
 * runs whatever the API server answers, so the error is no end of it. The executor follows on and
 * reports the end it observes, once, and the claim records that end (a claim left showing an
 * operation in flight would refuse every later attempt).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RESOURCES } from "../../queue/kube/index.js";
import type { SafetyChecks } from "../../sidecar/applier-kind.js";
import { ArgoCDExecutor } from "../../sidecar/argocd/executor.js";
import { readOperation } from "../../sidecar/operation-record.js";
import { unrecordedChecks } from "../support/safety-checks.js";
import { type Cluster, cm, type Repo, recorder, startCluster, until } from "./harness.js";

let c: Cluster;
let repo: Repo;
let c1: string;
let n = 0;

beforeAll(async () => {
  c = await startCluster();
  await c.startArgo();
  repo = await c.repo();
  [c1] = (await repo.pushAll([["cm.yaml", cm("settings", "v1")]])) as [string];
});
afterAll(async () => {
  await c?.close();
});

const executor = (checks: Partial<SafetyChecks> = {}) =>
  new ArgoCDExecutor({
    kube: c.kube,
    log: c.log,
    events: c.events,
    now: () => new Date(),
    options: { pollMs: 20, busyWaitMs: 10_000, budgetMs: 10_000, maxPollMs: 100 },
    checks: unrecordedChecks(c.kube, checks),
  });

async function setup() {
  const name = `err${++n}`;
  const { ref } = await c.heldApp(name, repo);
  const claim = { type: RESOURCES.argoCDClaim, namespace: "argocd", name };
  const statusPath = `/apis/applygate.dev/v1alpha1/namespaces/argocd/argocdclaims/${name}/status`;
  return { name, ref, claim, statusPath };
}

const terminal = (phases: string[]) =>
  phases.filter((p) => ["Succeeded", "Failed", "RequestFailed", "Rejected", "Dropped", "Stale"].includes(p));

describe("a 500 on the claim's status while a sync runs", () => {
  it("on the write that records Running: followed on, Succeeded once, recorded", async () => {
    const { name, ref, claim, statusPath } = await setup();
    const hold = c.argo!.holdSync(ref);
    const r = recorder();
    // After Requested (the record written), the claim's next status write is the one of Running.
    const report: typeof r.report = async (phase, extra) => {
      if (phase === "Requested")
        c.api.faults.failNext(2, { method: "PATCH", pathPrefix: statusPath, status: 500 });
      await r.report(phase, extra);
    };
    const done = executor().execute(
      c.attempt(name, name, c1, `t-${name}`),
      report,
      new AbortController().signal,
    );
    await until(async () => r.phases().includes("Running"), "Running reported");
    hold.release();
    await done;
    expect(terminal(r.phases())).toEqual(["Succeeded"]);
    expect(await readOperation(c.kube, claim)).toMatchObject({ phase: "Succeeded", commit: c1 });
  });

  it("on the write that records the end: written again, Succeeded once, recorded", async () => {
    const { name, ref, claim, statusPath } = await setup();
    const hold = c.argo!.holdSync(ref);
    const r = recorder();
    const done = executor().execute(
      c.attempt(name, name, c1, `t-${name}`),
      r.report,
      new AbortController().signal,
    );
    await until(async () => r.phases().includes("Running"), "Running reported");
    c.api.faults.failNext(2, { method: "PATCH", pathPrefix: statusPath, status: 500 });
    hold.release();
    await done;
    expect(terminal(r.phases())).toEqual(["Succeeded"]);
    expect(await readOperation(c.kube, claim)).toMatchObject({ phase: "Succeeded", commit: c1 });
  });
});

describe("a failure before the sync starts", () => {
  it("(the last look's Redis read throwing) takes the record back and starts nothing, so no restart ends it again", async () => {
    const { name, ref, claim } = await setup();
    const r = recorder();
    // Found by the soak (seed 5023, 8 actions): Redis went away between the record and the checks.
    const lost = executor({
      freshness: async () => {
        throw new Error("Reached the max retries per request limit (which is 1)");
      },
    }).execute(c.attempt(name, name, c1, `t-${name}`), r.report, new AbortController().signal);
    await expect(lost).rejects.toThrow(/max retries/);
    expect(r.phases()).toEqual(["Requested"]);
    // Nothing on the claim for a restart's recovery to end a second time (it withdrew to nothing).
    expect(await readOperation(c.kube, claim)).toBeUndefined();
    expect(c.argo!.syncs(ref)).toHaveLength(0);
    expect((await c.getApp(name)).operation ?? undefined).toBeUndefined();
  });

  it("(a 409 storm on the record's write as the sidecar stops) throws with nothing on the claim", async () => {
    // Seed 82057: the write that records the operation still conflicted after its tries while a
    // graceful stop aborted the attempt. The executor host reads the claim after such a throw: no
    // record means nothing to recover, so it reports RequestFailed (sidecar/executor.test.ts).
    const { name, ref, claim, statusPath } = await setup();
    const r = recorder();
    const storm = 20;
    c.api.faults.failNext(storm, { method: "PATCH", pathPrefix: statusPath, status: 409 });
    const stop = new AbortController();
    const lost = executor().execute(c.attempt(name, name, c1, `t-${name}`), r.report, stop.signal);
    await until(async () => c.api.faults.pending(statusPath) < storm, "the record's first write refused");
    stop.abort();
    await expect(lost).rejects.toThrow(/conflict/i);
    c.api.faults.reset();
    expect(r.phases()).toEqual([]);
    expect(await readOperation(c.kube, claim)).toBeUndefined();
    expect(c.argo!.syncs(ref)).toHaveLength(0);
  });
});
