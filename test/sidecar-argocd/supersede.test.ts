/**
 * An Argo CD operation a newer tip supersedes, against argosim: the branch worker's notice (kept
 * in Redis, announced to the follower) ends an operation waiting for Argo CD's own retry by the
 * proven-stale rule of seed 002 — its revision a proven ancestor of the tip the worker records
 * now, terminated at the version read — and it is recorded and reported Superseded, never
 * Succeeded or Failed. A tip forced back, or one the clone does not know, ends nothing.
 */

import { describe, expect, it } from "vitest";
import type { SupersededNotice } from "../../queue/contract.js";
import { branchKeys, SUPERSEDED_TTL_SECONDS, supersededKey } from "../../queue/keys.js";
import { operationStateOf } from "../../queue/kube/index.js";
import { cloneAncestry } from "../../sidecar/argocd/ancestry.js";
import type { Ancestry } from "../../sidecar/argocd/stale.js";
import { buildSyncOperation } from "../../sidecar/argocd/sync.js";
import { readOperation, recordOperation } from "../../sidecar/operation-record.js";
import { redisSupersessions } from "../../sidecar/supersessions.js";
import { fileWorld } from "../support/file-world.js";
import { capturingLogger } from "../support/log-lines.js";
import { type Repo, recorder, startCluster, until } from "./harness.js";

let repo: Repo;
/** c1 ← c2 ← c3 on main. */
let c1: string;
let c2: string;
let c3: string;
const BRANCH = "git/r@main";

const c = fileWorld(async () => {
  const c = await startCluster({ argo: {} });
  [repo, c1, c2, c3] = await c.history("v1", "v2", "v3");
  return c;
});

async function executor(log = c.log, ancestry: Ancestry | undefined = undefined) {
  ancestry ??= cloneAncestry(await repo.clone());
  return c.executor(
    { pollMs: 20, busyWaitMs: 10_000, budgetMs: 60_000, maxPollMs: 100, ancestry },
    { log, supersessions: redisSupersessions(c.redis.client, c.redis.prefix) },
  );
}

/**
 * A held Application whose syncs fail, with Argo CD's retry waiting 20 s before its first retry
 * (a `10s` duration, doubled once): an operation of ours sits in that wait.
 */
async function failing() {
  const held = await c.held("sup", repo, {
    syncPolicy: { retry: { limit: 5, backoff: { duration: "10s", factor: 2, maxDuration: "3m" } } },
  });
  for (let i = 0; i < 6; i++) c.argo!.failNextSync(held.ref);
  return held;
}

const tipIs = (sha: string) => c.redis.client.set(branchKeys(c.redis.prefix, BRANCH).tip, sha);
const notice = (name: string, token: string, commit: string, tip: string): SupersededNotice => ({
  token,
  claim: { kind: "ArgoCDClaim", namespace: "argocd", name },
  branchKey: BRANCH,
  commit,
  tip,
  at: new Date().toISOString(),
});
const opState = async (name: string) => operationStateOf(await c.getApp(name));
/** Waits until the operation waits for Argo CD's retry, and the executor reported it so. */
const waitingForRetry = (r: ReturnType<typeof recorder>) =>
  until(async () => r.reports.some((x) => x.phase === "Running" && x.extra.retry), "the retry wait reported");

describe("an Argo CD operation a newer tip supersedes", () => {
  it("is terminated within its retry wait and reported Superseded, its retry never run", async () => {
    const { name, ref, claim } = await failing();
    const e = await executor();
    const token = `t-${name}`;
    await tipIs(c1);
    const r = c.start(e, c.attempt(name, c1));
    await waitingForRetry(r);
    // The claim is told which attempt comes next, of how many, and when: Argo CD's own arithmetic.
    const wait = r.reports.find((x) => x.extra.retry)?.extra.retry;
    const state = await opState(name);
    expect(wait).toEqual({
      attempt: 2,
      of: 6,
      at: new Date(Date.parse(state?.finishedAt ?? "") + 20_000).toISOString(),
    });
    const started = Date.now();
    // The worker proved c1 an ancestor of c2; the branch has moved on to c3 since: proven here.
    await tipIs(c3);
    e.supersede(notice(name, token, c1, c2));
    await r.done;
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(r.phases().at(-1)).toBe("Superseded");
    expect(r.phases()).not.toContain("Succeeded");
    expect(r.phases()).not.toContain("Failed");
    expect(r.reports.at(-1)?.extra).toMatchObject({ reason: "Superseded" });
    expect(await readOperation(c.kube, claim)).toMatchObject({ phase: "Superseded", commit: c1 });
    // Argo CD ended it as terminated, with no retry after.
    expect(await opState(name)).toMatchObject({
      phase: "Failed",
      message: expect.stringMatching(/^Operation terminated/),
    });
    expect(c.argo!.syncs(ref)).toEqual([]);
    expect(
      c.events.events.some((x) => x.reason === "StaleOperationTerminated" && x.regarding.name === name),
    ).toBe(true);
  });

  it("a tip forced back since the notice, or one the clone does not know, ends nothing", async () => {
    for (const [tip, why] of [
      [c1, "NotAncestor"],
      ["f".repeat(40), "Unknown"],
    ] as const) {
      const { name } = await failing();
      const logs = capturingLogger();
      const e = await executor(logs.log);
      const token = `t-${name}`;
      await tipIs(c2);
      const abort = new AbortController();
      const r = c.start(e, c.attempt(name, c2), { signal: abort.signal });
      await waitingForRetry(r);
      // The worker saw c3 over c2; the branch is back at c1 (or somewhere unknown) by now.
      await tipIs(tip);
      const before = (await c.getApp(name)).metadata.resourceVersion;
      e.supersede(notice(name, token, c2, c3));
      // The follower woke on the notice, read the tip and proved nothing.
      await until(
        async () => logs.lines.some((l) => l.includes("superseded operation left to run: not proven")),
        "the follower to judge the notice",
      );
      const line = logs.lines.find((l) => l.includes("not proven")) ?? "";
      expect(JSON.parse(line)).toMatchObject({ why, tip, notice: c3 });
      const s = await opState(name);
      expect(s?.phase, tip).toBe("Running");
      expect((await c.getApp(name)).metadata.resourceVersion).toBe(before);
      abort.abort();
      await r.done;
      expect(r.phases(), tip).not.toContain("Superseded");
    }
  });

  it("a follower that starts later (a restart's recovery) reads the kept notice and ends it, on the worker's proof while its tip stands", async () => {
    const { name, claim } = await failing();
    const token = `t-${name}`;
    const rec = await recordOperation(c.kube, claim, {
      token,
      commit: c2,
      targets: [{ uid: "gt", reason: "ForeignCommit" }],
    });
    await c.setOperation(name, buildSyncOperation(await c.getApp(name), { commit: c2, token }));
    await until(async () => !!(await opState(name))?.finishedAt, "the first attempt failed, its retry waits");
    await tipIs(c3);
    await c.redis.client.set(
      supersededKey(c.redis.prefix, token),
      JSON.stringify(notice(name, token, c2, c3)),
      "EX",
      SUPERSEDED_TTL_SECONDS,
    );
    const r = recorder();
    // A clone that knows nothing: the worker's proof, for the tip it still records, is the proof.
    const asked: string[] = [];
    const e = await executor(c.log, async (revision) => {
      asked.push(revision);
      return "unknown";
    });
    await e.recover!(
      { claim, applier: { namespace: "argocd", name }, operation: rec.operation, branchKey: BRANCH },
      r.report,
      new AbortController().signal,
    );
    expect(r.phases().at(-1)).toBe("Superseded");
    expect(await readOperation(c.kube, claim)).toMatchObject({ phase: "Superseded" });
    expect(asked).toEqual([]);
  });
});
