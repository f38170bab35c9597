/**
 * A transient API server error (a 500) on the claim's status writes while a sync runs: the sync
 * runs whatever the API server answers, so the error is no end of it. The executor follows on and
 * reports the end it observes, once, and the claim records that end (a claim left showing an
 * operation in flight would refuse every later attempt).
 */
import { describe, expect, it } from "vitest";
import { readOperation } from "../../sidecar/operation-record.js";
import { fileWorld } from "../support/file-world.js";
import { type Repo, startCluster, until } from "./harness.js";

let repo: Repo;
let c1: string;

const c = fileWorld(async () => {
  const c = await startCluster({ argo: {} });
  [repo, c1] = await c.history("v1");
  return c;
});

const executor = (checks = {}) =>
  c.executor({ pollMs: 20, busyWaitMs: 10_000, budgetMs: 10_000, maxPollMs: 100 }, { checks });

const setup = () => c.held("err", repo);

const terminal = (phases: string[]) =>
  phases.filter((p) => ["Succeeded", "Failed", "RequestFailed", "Rejected", "Dropped", "Stale"].includes(p));

describe("a 500 on the claim's status while a sync runs", () => {
  // After Requested (the record written), the claim's next status write is the one of Running;
  // after Running, the one of the end.
  for (const [write, after] of [
    ["the write that records Running: followed on", "Requested"],
    ["the write that records the end: written again", "Running"],
  ] as const) {
    it(`on ${write}, Succeeded once, recorded`, async () => {
      const { name, ref, claim, statusPath } = await setup();
      const hold = c.argo!.holdSync(ref);
      const r = c.start(executor(), c.attempt(name, c1), {
        on: (phase) => {
          if (phase === after)
            c.api.faults.failNext(2, { method: "PATCH", pathPrefix: statusPath, status: 500 });
        },
      });
      await until(async () => r.phases().includes("Running"), "Running reported");
      hold.release();
      await r.done;
      expect(terminal(r.phases())).toEqual(["Succeeded"]);
      expect(await readOperation(c.kube, claim)).toMatchObject({ phase: "Succeeded", commit: c1 });
    });
  }
});

describe("a failure before the sync starts", () => {
  it("(the last look's Redis read throwing) takes the record back and starts nothing, so no restart ends it again", async () => {
    const { name, ref, claim } = await setup();
    // Found by the soak (seed 5023, 8 actions): Redis went away between the record and the checks.
    const freshness = async (): Promise<never> => {
      throw new Error("Reached the max retries per request limit (which is 1)");
    };
    const r = c.start(executor({ freshness }), c.attempt(name, c1));
    await expect(r.done).rejects.toThrow(/max retries/);
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
    const storm = 20;
    c.api.faults.failNext(storm, { method: "PATCH", pathPrefix: statusPath, status: 409 });
    const stop = new AbortController();
    const r = c.start(executor(), c.attempt(name, c1), { signal: stop.signal });
    await until(async () => c.api.faults.pending(statusPath) < storm, "the record's first write refused");
    stop.abort();
    await expect(r.done).rejects.toThrow(/conflict/i);
    c.api.faults.reset();
    expect(r.phases()).toEqual([]);
    expect(await readOperation(c.kube, claim)).toBeUndefined();
    expect(c.argo!.syncs(ref)).toHaveLength(0);
  });
});
