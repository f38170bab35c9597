/**
 * A branch that does not exist yet, against the real Git server: it is created from its base
 * branch (the one its GitTargets or GitProvider name, else the repository's default branch), never
 * as a commit holding one folder; until a named base exists, writes stay pending and the GitTarget
 * says why (BaseBranchMissing).
 */
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ManualClock } from "../../queue/worker/clock.js";
import { MemoryStatusSink, publicationConditions } from "../../queue/worker/status.js";
import { gitOk } from "../git/cli.js";
import { configMapWrite, FOLDER, type Harness, harness, waitFor } from "./harness.js";

const BRANCH = "env/dev";

describe("a branch that does not exist yet", () => {
  let h: Harness;
  afterEach(async () => {
    await h.close();
  });

  const bare = () => join(h.server.root, "site.git");
  const parents = async (commit: string) =>
    (await gitOk(["rev-list", "--parents", "-n", "1", commit], { cwd: bare() })).trim().split(" ").slice(1);
  const show = (commit: string, path: string) =>
    gitOk(["show", `${commit}:${path}`], { cwd: bare() }).catch(() => undefined);

  it("is created from the base branch its GitTargets name", async () => {
    h = await harness({ "README.md": "main\n" });
    await gitOk(["branch", "release", "main"], { cwd: bare() });
    await gitOk(["commit-tree", "-m", "later on main", "-p", "main", "main^{tree}"], { cwd: bare() }).then(
      (c) => gitOk(["update-ref", "refs/heads/main", c.trim()], { cwd: bare() }),
    );
    const release = (await h.server.tip("site", "release")) as string;
    await h.newWorker({ spec: { ...h.spec, branch: BRANCH, baseBranch: "release" } });
    const w = configMapWrite(h.key, "a", "1", { save: true });
    expect(await h.accept(w)).toBe(true);
    const commit = await waitFor("published", () => h.published(w.id));
    expect(await h.server.tip("site", BRANCH)).toBe(commit);
    expect(await parents(commit)).toEqual([release]);
    expect(await show(commit, "README.md")).toBe("main\n");
    expect(await show(commit, `${FOLDER}/core/configmap/web/a.yaml`)).toContain('value: "1"');
  });

  it("without a base named, is created from the repository's default branch; an empty repository gets a first commit", async () => {
    h = await harness({ "README.md": "main\n" });
    const main = (await h.server.tip("site")) as string;
    await h.newWorker({ spec: { ...h.spec, branch: BRANCH } });
    const w = configMapWrite(h.key, "a", "1", { save: true });
    expect(await h.accept(w)).toBe(true);
    const commit = await waitFor("published", () => h.published(w.id));
    expect(await parents(commit)).toEqual([main]);
    await h.close();

    h = await harness({});
    await h.newWorker({ spec: { ...h.spec, branch: BRANCH } });
    const first = configMapWrite(h.key, "a", "1", { save: true });
    expect(await h.accept(first)).toBe(true);
    const root = await waitFor("published", () => h.published(first.id));
    expect(await parents(root)).toEqual([]);
  });

  it("waits, writes pending and the GitTarget saying BaseBranchMissing, until the named base exists", async () => {
    h = await harness({ "README.md": "main\n" }, { idleMs: 5_000, maxMs: 60_000 });
    const clock = new ManualClock(Date.parse("2026-03-01T00:00:00Z"));
    const status = new MemoryStatusSink();
    const worker = await h.newWorker({
      clock,
      status,
      pollMs: 1000,
      spec: { ...h.spec, branch: BRANCH, baseBranch: "release" },
    });
    const settle = () => waitFor("worker asleep", () => clock.waiting() > 0);
    const tick = async (ms: number) => {
      await settle();
      clock.advance(ms);
      await settle();
    };
    const w = configMapWrite(h.key, "a", "1", { save: true });
    expect(await h.accept(w)).toBe(true);
    worker.wake();
    await waitFor("the publication failed", () => worker.snapshot().nextRetryAt !== undefined);
    // Two more retries on the one schedule: nothing is pushed, nothing dropped.
    await tick(10_000);
    await tick(20_000);
    const report = status.byTarget.get("team/site");
    expect(report).toMatchObject({ state: "Retrying", retryReason: "BaseBranchMissing", retainedWrites: 1 });
    expect(report?.lastError).toContain("base branch release does not exist");
    const ready = publicationConditions(report as NonNullable<typeof report>, undefined, clock.now())[0];
    expect([ready?.type, ready?.status, ready?.reason]).toEqual(["Ready", "False", "BaseBranchMissing"]);
    expect(await h.published(w.id)).toBeNull();
    expect(await h.server.tip("site", BRANCH)).toBeUndefined();
    expect(worker.snapshot()).toMatchObject({ retainedWrites: 1, pendingWrites: 1 });

    // Somebody creates the base: the next retry creates the branch from it.
    await gitOk(["branch", "release", "main"], { cwd: bare() });
    const release = (await h.server.tip("site", "release")) as string;
    await tick(40_000);
    const commit = await waitFor("published", () => h.published(w.id));
    expect(await h.server.tip("site", BRANCH)).toBe(commit);
    expect(await parents(commit)).toEqual([release]);
    await waitFor("published status", () => status.byTarget.get("team/site")?.state === "Published");
    expect(status.byTarget.get("team/site")?.retryReason).toBeUndefined();
  });
});
