/**
 * The decisions shell end to end: a worker replica with decisions on, real Redis (BullMQ), the real
 * Git server, the simulated API server holding the GitTarget, FluxClaim and Kustomization, and a
 * scripted executor on `attempts-flux` standing in for the sidecar: it records the operation on
 * the claim's status and reports each phase on `reports`, as the sidecar does.
 */
import { randomUUID } from "node:crypto";
import * as k8s from "@kubernetes/client-node";
import { Queue } from "bullmq";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { type AcceptedWrite, type Attempt, QUEUES } from "../../queue/contract.js";
import type { GitTarget } from "../../queue/crds/index.js";
import { acceptWrite } from "../../queue/intake.js";
import { branchKeys } from "../../queue/keys.js";
import { ManualClock } from "../../queue/worker/clock.js";
import { redisFreshnessCheck, staleBecause } from "../../sidecar/tip-check.js";
import { readAuditLog } from "../cluster/apiserver/index.js";
import { stopGpgAgents } from "../support/signing.js";
import {
  appliedAndEnded,
  CLAIM_KEY,
  cm,
  FOLDER,
  GROUP,
  isAncestor,
  NS,
  type Script,
  secondTarget,
  settled,
  settledAsEcho,
  show,
  succeed,
  takeoverBeforeRecord,
  type World,
  world,
} from "./decisions-world.js";
import { foreignCommit } from "./foreign.js";
import { waitFor } from "./harness.js";

describe("decisions shell: the branch worker decides and sends applies", () => {
  let w: World;
  afterEach(async () => {
    await w.close();
  });
  afterAll(stopGpgAgents);

  it("two edits a few seconds apart with a foreign push between them: one apply, of a tip holding both sides", {
    timeout: 60_000,
  }, async () => {
    // The window closes only on the second edit's save (its idle time is longer than the test),
    // so how long the foreign push takes on a loaded machine cannot split the two edits.
    w = await world({ appliedInitial: true, windowSeconds: 30 });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    const first = await w.accept("a", "1");
    // The gaps are the case itself: edits seconds apart, the foreign push between them.
    await new Promise((r) => setTimeout(r, 1000));
    // Somebody pushes straight to the repository: no notice reaches the worker.
    const foreign = await foreignCommit(w.bare, `${FOLDER}/from-git.txt`, "git side\n");
    await new Promise((r) => setTimeout(r, 1000));
    const second = await w.accept("a", "2", { save: true });
    const tip = await waitFor("both edits published", () => w.published(second.id));
    expect(await w.published(first.id)).toBe(tip);
    await waitFor("the apply succeeded", async () => (await w.claim()).status?.lastAppliedCommit === tip);
    await waitFor("nothing left to decide", () => settled(w));

    expect(w.attempts).toHaveLength(1);
    const [attempt] = w.attempts as [Attempt];
    expect(attempt.commit).toBe(tip);
    expect(attempt.targets).toEqual([
      { uid: w.targetUid, namespace: NS, name: "site", reason: "ForeignCommit" },
    ]);
    // The applied commit holds both sides: the foreign commit and the later API edit.
    expect(await isAncestor(w, foreign, tip)).toBe(true);
    expect(await show(w, tip, `${FOLDER}/from-git.txt`)).toBe("git side\n");
    expect(await show(w, tip, cm("a"))).toContain('value: "2"');
    expect(await w.git.tip("site")).toBe(tip);
  });

  it("asks nothing before the first observation; the baseline converges once; a converge of the last applied commit asks nothing", {
    timeout: 60_000,
  }, async () => {
    w = await world({ appliedInitial: false });
    w.git.faults.setDown(true);
    await w.startReplica();
    // The GitTarget names the claim (a converge is pending), but the remote cannot be read yet.
    await waitFor("targets listed", () => w.driver().state.targets[w.targetUid]?.claim === CLAIM_KEY);
    // The worker tried to read the remote and was answered 503: still nothing observed, nothing asked.
    await waitFor("a read of the remote, refused", () => w.git.counts().advertisement > 0);
    expect(w.driver().state.observed).toBe(false);
    expect(w.driver().state.appliers[CLAIM_KEY]?.pending.byTarget[w.targetUid]).toContain("Converge");
    expect(w.attempts).toHaveLength(0);

    w.git.faults.setDown(false);
    await waitFor(
      "the converge applied",
      async () => (await w.claim()).status?.lastAppliedCommit === w.initial,
    );
    await waitFor("nothing left to decide", () => settled(w));
    expect(w.attempts.map((a) => [a.commit, a.targets.map((t) => t.reason)])).toEqual([
      [w.initial, ["CatchUp"]],
    ]);

    // A new start converges again, but the applier already applied the tip: nothing is asked.
    await w.stopReplica();
    await w.startReplica();
    await waitFor("baseline after the restart", () => w.driver().state.observed);
    await w.driver().idle();
    expect(settled(w)).toBe(true);
    expect(w.attempts).toHaveLength(1);
  });

  it("a Failed operation gives its reasons back and is retried after the backoff", {
    timeout: 60_000,
  }, async () => {
    w = await world({ appliedInitial: true });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    let failedAt = 0;
    w.scripts.push(async (a, ex) => {
      await ex.report(a, "Requested");
      failedAt = await ex.report(a, "Failed");
    });
    const foreign = await foreignCommit(w.bare, `${FOLDER}/f.txt`, "1\n");
    // What a push notice does: it is only a hint to look at the remote.
    w.worker().observeSoon();
    await waitFor("the retry applied", async () => (await w.claim()).status?.lastAppliedCommit === foreign);
    expect(w.attempts).toHaveLength(2);
    const [first, retry] = w.attempts as [Attempt, Attempt];
    expect(first.targets.map((t) => t.reason)).toEqual(["ForeignCommit"]);
    expect(retry.targets.map((t) => t.reason)).toEqual(["ForeignCommit"]);
    expect(retry.commit).toBe(foreign);
    expect(retry.token).not.toBe(first.token);
    // Backoff after a first failure is 2 s.
    expect(Date.parse(retry.sentAt) - failedAt).toBeGreaterThanOrEqual(1900);
  });

  it("a Stale attempt is decided again at once, at the tip as it is then", { timeout: 60_000 }, async () => {
    w = await world({ appliedInitial: true });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    let later = "";
    w.scripts.push(async (a, ex) => {
      // The executor's recheck finds the branch moved on: the attempt is stale.
      later = await foreignCommit(w.bare, `${FOLDER}/g.txt`, "2\n");
      await ex.report(a, "Stale");
    });
    const foreign = await foreignCommit(w.bare, `${FOLDER}/f.txt`, "1\n");
    w.worker().observeSoon();
    await waitFor("the retry applied", async () => (await w.claim()).status?.lastAppliedCommit === later);
    await waitFor("nothing left to decide", () => settled(w));
    expect(w.attempts.map((a) => a.commit)).toEqual([foreign, later]);
    expect(w.attempts[1]?.targets.map((t) => t.reason)).toEqual(["ForeignCommit"]);
    // No backoff was started by the stale attempt.
    expect(w.driver().state.appliers[CLAIM_KEY]?.failures).toBe(0);
  });

  it("an edit accepted after the flush mark, before the executor's write: the attempt ends Stale and the next, sent at once, carries the edit", {
    timeout: 60_000,
  }, async () => {
    // Windows close only on a flush: the worker publishes the edit for the restale's flush alone.
    w = await world({ appliedInitial: true, windowSeconds: 30 });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    const freshness = redisFreshnessCheck(w.redis.client, w.redis.prefix);
    let edit: AcceptedWrite | undefined;
    /** What the sidecar does just before its write: Stale when not fresh, else it applies. */
    const asSidecar: Script = async (a, ex) => {
      await ex.report(a, "Requested");
      const stale = staleBecause(await freshness(a), a);
      if (stale) {
        await ex.report(a, "Stale", stale.reason);
        return;
      }
      for (const p of ["Running", "Settling", "Succeeded"] as const) await ex.report(a, p);
    };
    w.scripts.push(async (a, ex) => {
      // The user edits after the flush took its mark, before the applier started.
      edit = await w.accept("a", "mine");
      await asSidecar(a, ex);
    }, asSidecar);
    const foreign = await foreignCommit(w.bare, `${FOLDER}/f.txt`, "1\n");
    w.worker().observeSoon();
    const tip = await waitFor("the edit published", () => (edit ? w.published(edit.id) : null));
    await waitFor("the apply succeeded", async () => (await w.claim()).status?.lastAppliedCommit === tip);
    await waitFor("nothing left to decide", () => settled(w));

    expect(w.attempts.map((a) => a.commit)).toEqual([foreign, tip]);
    const [first, second] = w.attempts as [Attempt, Attempt];
    expect(first.editsAfter?.folders).toEqual([FOLDER]);
    // The applied commit holds the edit: the older one never ran over it.
    expect(await isAncestor(w, foreign, tip)).toBe(true);
    expect(await show(w, tip, cm("a"))).toContain("mine");
    expect(second.targets.map((t) => t.reason)).toEqual(["ForeignCommit"]);
    // It rechecked too (within the budget) and found nothing new; no backoff was started.
    expect(second.editsAfter?.folders).toEqual([FOLDER]);
    expect(w.driver().state.appliers[CLAIM_KEY]?.failures).toBe(0);
    expect(w.driver().state.appliers[CLAIM_KEY]?.restaleSince).toBeNull();
  });

  it("continuous editing never starves an apply: 5 s after the chain's first restale the attempts go without the recheck", {
    timeout: 60_000,
  }, async () => {
    w = await world({ appliedInitial: true, windowSeconds: 30 });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    const freshness = redisFreshnessCheck(w.redis.client, w.redis.prefix);
    const seen: string[] = [];
    // An edit lands before every attempt's write.
    const editing: Script = async (a, ex) => {
      await w.accept("a", `edit-${w.attempts.length}`);
      await ex.report(a, "Requested");
      const f = await freshness(a);
      seen.push(f);
      const stale = staleBecause(f, a);
      if (stale) return void (await ex.report(a, "Stale", stale.reason));
      for (const p of ["Running", "Settling", "Succeeded"] as const) await ex.report(a, p);
    };
    for (let i = 0; i < 200; i++) w.scripts.push(editing);
    await foreignCommit(w.bare, `${FOLDER}/f.txt`, "1\n");
    w.worker().observeSoon();
    await waitFor("an apply succeeded", async () => {
      const applied = (await w.claim()).status?.lastAppliedCommit;
      return applied !== undefined && applied !== w.initial;
    });
    // Every attempt with the recheck found the edit made before it; the one that applied had none.
    const last = w.attempts.at(-1) as Attempt;
    expect(seen.at(-1)).toBe("current");
    expect(seen.slice(0, -1).every((f) => f === "edited")).toBe(true);
    expect(w.attempts.slice(0, -1).every((a) => a.editsAfter !== undefined)).toBe(true);
    expect(last.editsAfter).toBeUndefined();
    expect((await w.claim()).status?.lastAppliedCommit).toBe(last.commit);
    // It went no sooner than the budget after the first restale (which came after the first send).
    const first = Date.parse((w.attempts[0] as Attempt).sentAt);
    expect(Date.parse(last.sentAt) - first).toBeGreaterThanOrEqual(5_000);
  });

  it("a restart restores the operation out from the claim and reasons from Redis; the baseline is a converge, never a ForeignCommit", {
    timeout: 60_000,
  }, async () => {
    w = await world({ appliedInitial: true });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    w.scripts.push(async (a, ex) => {
      await ex.report(a, "Requested");
      await ex.report(a, "Running");
      await gate;
      await ex.report(a, "Settling");
      await ex.report(a, "Succeeded");
    });
    const f1 = await foreignCommit(w.bare, `${FOLDER}/f.txt`, "1\n");
    w.worker().observeSoon();
    await waitFor("the operation running", async () => {
      const op = (await w.claim()).status?.operation as { phase?: string } | undefined;
      return op?.phase === "Running";
    });
    await w.stopReplica();
    const saved = await w.redis.client.get(branchKeys(w.redis.prefix, w.key).decisions);
    expect(JSON.parse(saved as string).appliers[CLAIM_KEY].operation.token).toBe(w.attempts[0]?.token);

    // While no worker runs, somebody pushes: the next start must not answer it with a ForeignCommit.
    const f2 = await foreignCommit(w.bare, `${FOLDER}/g.txt`, "2\n");
    await w.startReplica();
    await waitFor("baseline after the restart", () => w.driver().state.observed);
    await w.driver().idle();
    const a = w.driver().state.appliers[CLAIM_KEY];
    expect(a?.operation?.token).toBe(w.attempts[0]?.token);
    expect(a?.pending.all).toEqual(["Converge"]);
    expect(Object.values(a?.pending.byTarget ?? {}).flat()).not.toContain("ForeignCommit");
    expect(w.attempts).toHaveLength(1);

    release();
    await waitFor("the converge applied", async () => (await w.claim()).status?.lastAppliedCommit === f2);
    await waitFor("nothing left to decide", () => settled(w));
    expect(w.attempts.map((x) => [x.commit, x.targets.map((t) => t.reason)])).toEqual([
      [f1, ["ForeignCommit"]],
      [f2, ["CatchUp"]],
    ]);
  });

  it("a takeover follows the attempt the last owner sent, recorded on the claim just after the new owner read it: no second attempt for its commit, its end report taken, one operation in the claim's history", {
    timeout: 60_000,
  }, async () => {
    w = await world({ appliedInitial: true });
    const race = await takeoverBeforeRecord(w, { reportEnd: true });
    race.end();
    await waitFor("the apply succeeded", async () => (await w.claim()).status?.lastAppliedCommit === race.f1);
    await waitFor("nothing left to decide", () => settled(w));
    await w.driver().idle();
    // Its end report was taken as the attempt for f1: nothing else was sent or refused.
    expect(w.driver().state.appliers[CLAIM_KEY]?.lastAppliedCommit).toBe(race.f1);
    expect(w.attempts.map((x) => x.token)).toEqual([race.first.token]);
    expect(race.ends).toEqual([`${race.first.token} Succeeded`]);
    const history = (await w.claim()).status?.history as Array<{ token: string; commit: string }>;
    expect(history.map((h) => [h.token, h.commit])).toEqual([[race.first.token, race.f1]]);
  });

  it("an end report of the last owner's attempt that never comes: the claim's record, still showing the end at the next listing, ends it", {
    timeout: 60_000,
  }, async () => {
    // Listings every 200 ms: the record's end is seen twice without waiting for a change.
    w = await world({ appliedInitial: true, listIntervalMs: 200 });
    const race = await takeoverBeforeRecord(w, { reportEnd: false });
    race.end();
    await waitFor("the operation ended from its record", () => settled(w));
    expect(w.driver().state.appliers[CLAIM_KEY]?.lastAppliedCommit).toBe(race.f1);
    expect(w.attempts.map((x) => x.token)).toEqual([race.first.token]);
    expect(race.ends).toEqual([`${race.first.token} Succeeded`]);
  });

  // Found by the soak (seed 49061, --webhook): an attempt the executor refused without a report
  // (its taken mark's answer lost as Redis went down) kept the branch waiting forever.
  it("an attempt that ends with no report and no record (its job gone from the queue): ended AttemptLost at the second check, and its reasons sent again", {
    timeout: 60_000,
  }, async () => {
    const clock = new ManualClock(Date.parse("2026-12-01T13:00:00Z"));
    w = await world({ appliedInitial: true, clock });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    w.scripts.push(async () => {}); // taken, and ended without a record or a report
    const foreign = await foreignCommit(w.bare, `${FOLDER}/f.txt`, "1\n");
    w.worker().observeSoon();
    await waitFor("the attempt sent", () => w.attempts.length === 1);
    const lost = w.attempts[0] as Attempt;
    const op = () => w.driver().state.appliers[CLAIM_KEY]?.operation;
    // Its job completes; nothing reports it. Young, it is not checked.
    const attemptsFlux = new Queue("attempts-flux", {
      connection: { url: w.redis.url },
      prefix: w.redis.prefix,
    });
    await waitFor(
      "its job finished",
      async () => (await attemptsFlux.getJobState(lost.token)) === "completed",
    );
    await attemptsFlux.close();
    clock.advance(10_000);
    await w.driver().idle();
    expect(op()).toMatchObject({ token: lost.token, phase: "Sent" });
    expect(op()?.missing).toBeUndefined();
    // Past ATTEMPT_CHECK_AFTER_MS, the first check finds it missing; the second ends it.
    clock.advance(10_000);
    await waitFor("found missing at one check", () => op()?.missing === true);
    expect(op()?.token).toBe(lost.token);
    clock.advance(5_000);
    await waitFor("ended AttemptLost", () => op()?.token !== lost.token);
    expect(w.driver().state.appliers[CLAIM_KEY]?.lastEnd).toMatchObject({
      phase: "RequestFailed",
      reason: "AttemptLost",
      commit: foreign,
    });
    expect(w.lost).toEqual(["flux"]);
    // After the first failure's backoff (2 s), its ForeignCommit goes again, and is applied.
    clock.advance(2_000);
    await waitFor("the retry applied", async () => (await w.claim()).status?.lastAppliedCommit === foreign);
    expect(w.attempts.map((a) => [a.commit, a.targets.map((t) => t.reason)])).toEqual([
      [foreign, ["ForeignCommit"]],
      [foreign, ["ForeignCommit"]],
    ]);
  });

  it("an applier write newer than an edit in the apply window makes a Repair due", {
    timeout: 60_000,
  }, async () => {
    w = await world({ appliedInitial: true });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    // Set once the attempt is out: the edit happens inside the window the send opened, however
    // long the flush before it took on a loaded machine.
    let editedAt = new Date(0);
    // The operation ends only once the claim shows repairPending (it is written in the background).
    let end!: () => void;
    const ended = new Promise<void>((r) => {
      end = r;
    });
    w.scripts.push(async (a, ex) => {
      await ex.report(a, "Requested");
      await ex.report(a, "Running");
      await gate;
      // The window observer saw kustomize-controller write the edited object after the edit.
      await ex.send({
        type: "applierWrite",
        token: a.token,
        claim: a.claim,
        branchKey: a.branchKey,
        object: { apiVersion: "v1", kind: "ConfigMap", namespace: "web", name: "a" },
        manager: "kustomize-controller",
        writtenAt: new Date(editedAt.getTime() + 2000).toISOString(),
        resourceVersion: "42",
        observedAt: new Date().toISOString(),
      });
      await ended;
      await ex.report(a, "Settling");
      await ex.report(a, "Succeeded");
    });
    w.scripts.push(succeed);
    await foreignCommit(w.bare, `${FOLDER}/f.txt`, "1\n");
    w.worker().observeSoon();
    await waitFor("the operation out", () => w.attempts.length === 1);
    editedAt = new Date(Math.ceil(Date.now() / 1000) * 1000);
    // An API edit while the apply runs: decided into the window the attempt opened.
    const edit = await w.accept("a", "mine", { save: true, editedAt: editedAt.toISOString() });
    const tip = await waitFor("the edit published", () => w.published(edit.id));
    release();
    await waitFor("repairPending shown", async () => (await w.claim()).status?.repairPending === true);
    end();
    await waitFor("the repair applied", async () => (await w.claim()).status?.lastAppliedCommit === tip);
    await waitFor("nothing left to decide", () => settled(w));
    expect(w.attempts).toHaveLength(2);
    expect(w.attempts[1]?.targets.map((t) => t.reason)).toEqual(["Repair"]);
    expect(w.attempts[1]?.commit).toBe(tip);
    expect(w.collisions).toEqual([{ kind: "flux" }]);
    await waitFor("repairPending cleared", async () => (await w.claim()).status?.repairPending === false);
  });
  it("an apply's own write that reached the inbox within the grace after its operation ended, read by the next owner after a handover past the grace, is the applier's echo: settled without a commit", {
    timeout: 60_000,
  }, async () => {
    const clock = new ManualClock(Date.parse("2026-12-01T13:00:00Z"));
    w = await world({ appliedInitial: true, clock });
    const window = await appliedAndEnded(w);
    expect(window?.token).toBe(w.attempts[0]?.token);
    await w.stopReplica();

    // The apply's own write, made in the second the operation ended, reaches the inbox 4 s after
    // the end, inside the 10 s grace, while no owner runs; the next owner takes the branch 12 s
    // after the end (a killed owner's lease ran out first) and reads it then.
    const end = window?.completedAt as number;
    const writtenAt = new Date(Math.floor(end / 1000) * 1000).toISOString();
    clock.advance(12_000);
    const echo = await w.accept("a", "applied", {
      acceptedAt: new Date(end + 4_000).toISOString(),
      // As the watch plane hands it: the GitTarget's uid, the applier's manager and its time.
      target: { namespace: NS, name: "site", uid: w.targetUid },
      applierAuthored: { manager: "kustomize-controller", writtenAt, resourceVersion: "42" },
    });
    const tip = await w.git.tip("site");
    await w.startReplica();
    await settledAsEcho(w, echo, tip);
  });

  it("an apply's own write with no GitTarget uid, read by a new owner before its first listing of the GitTargets landed, is judged against the GitTarget: the applier's echo, settled without a commit", {
    timeout: 60_000,
  }, async () => {
    const clock = new ManualClock(Date.parse("2026-12-01T13:00:00Z"));
    w = await world({ appliedInitial: true, clock });
    const end = (await appliedAndEnded(w))?.completedAt as number;
    await w.stopReplica();

    // The apply's own write reaches the inbox 2 s after its operation ended, naming its GitTarget
    // by namespace and name only (no uid), while no owner runs.
    const writtenAt = new Date(Math.floor(end / 1000) * 1000).toISOString();
    clock.advance(2_000);
    const echo = await w.accept("a", "applied", {
      acceptedAt: new Date(end + 2_000).toISOString(),
      target: { namespace: NS, name: "site" },
      applierAuthored: { manager: "kustomize-controller", writtenAt, resourceVersion: "42" },
    });
    const tip = await w.git.tip("site");
    // The next owner's first listing of the GitTargets waits until its branch worker has read the
    // write from the inbox and handed it to the judge.
    let release = () => {};
    const listed = new Promise<void>((r) => {
      release = r;
    });
    const get = w.objects.get.bind(w.objects);
    w.objects.get = async (kind, namespace, name) => {
      if (kind === "GitTarget") await listed;
      return get(kind, namespace, name);
    };
    const started = w.startReplica();
    await waitFor("the write handed to the judge", () => (w.worker()?.judgingCount ?? 0) > 0);
    release();
    await started;
    await settledAsEcho(w, echo, tip);
  });

  it("the folder barrier: a branch whose tip lacks the GitTarget's folder sends its applier nothing, for any reason, until a published write creates the folder", {
    timeout: 60_000,
  }, async () => {
    w = await world({ appliedInitial: false, folderInGit: false });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    // Somebody pushes elsewhere on the branch: a ForeignCommit joins the baseline converge.
    const foreign = await foreignCommit(w.bare, "clusters/other/more.txt", "more\n");
    w.worker().observeSoon();
    await waitFor("the foreign commit observed", () => w.driver().state.tip === foreign);
    await w.driver().idle();
    expect(w.driver().state.appliers[CLAIM_KEY]?.pending.all).toEqual(
      expect.arrayContaining(["Converge", "ForeignCommit"]),
    );
    expect(w.driver().state.nextFlushId, "no flush was asked for").toBe(0);
    expect(w.attempts).toHaveLength(0);

    // The first write creates the folder: once it is published, one attempt for the tip holding it.
    const edit = await w.accept("a", "1", { save: true });
    const tip = await waitFor("the write published", () => w.published(edit.id));
    await waitFor("the apply succeeded", async () => (await w.claim()).status?.lastAppliedCommit === tip);
    await waitFor("nothing left to decide", () => settled(w));
    expect(w.attempts.map((a) => [a.commit, a.targets.map((t) => t.reason)])).toEqual([
      [tip, ["ForeignCommit"]],
    ]);
    expect(await show(w, tip, cm("a"))).toContain('value: "1"');
  });

  it("a GitTarget created after the worker took the branch gets its status and its converge at once, without a restart", {
    timeout: 60_000,
  }, async () => {
    w = await world({ appliedInitial: true });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    await waitFor("nothing left to decide", () => settled(w));
    const extra = await secondTarget(w, "clusters/extra");
    const read = async () =>
      (await w.custom.getNamespacedCustomObject({
        ...GROUP,
        plural: "gittargets",
        namespace: NS,
        name: "extra",
      })) as GitTarget;
    await waitFor("its status written", async () => (await read()).status?.publication?.commit === w.initial);
    const attempt = await waitFor("its converge sent", () =>
      w.attempts.find((a) => a.claim.name === "claim2"),
    );
    expect(attempt.commit).toBe(w.initial);
    expect(attempt.targets).toEqual([
      { uid: extra.metadata.uid, namespace: NS, name: "extra", reason: "CatchUp" },
    ]);
    await waitFor("its converge applied", () => {
      const a = w.driver().state.appliers[`FluxClaim/${NS}/claim2`];
      return a?.lastAppliedCommit === w.initial && a.operation === null;
    });
    // The first GitTarget's applier, already at the tip, was asked nothing.
    expect(w.attempts).toHaveLength(1);
  });

  it("an idle branch reads the cluster from the caches: after the start, no list or get of GitProviders, GitTargets, ScopeGrants, claims, ApplierGrants or Secrets, only watches", {
    timeout: 60_000,
  }, async () => {
    // A short safety-net period: many listings of the branch in the idle time below.
    w = await world({ appliedInitial: true, listIntervalMs: 100 });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    await waitFor("nothing left to decide", () => settled(w));
    const cached = [
      "gitproviders",
      "gittargets",
      "scopegrants",
      "fluxclaims",
      "argocdclaims",
      "appliergrants",
      "secrets",
    ];
    const reads = () =>
      readAuditLog(w.auditLog).filter(
        (e) => (e.verb === "list" || e.verb === "get") && cached.includes(e.objectRef?.resource ?? ""),
      );
    const before = reads().length;
    let listings = 0;
    const listed = (w.driver() as unknown as { o: { list: () => Promise<unknown> } }).o;
    const list = listed.list;
    listed.list = () => {
      listings++;
      return list();
    };
    await waitFor("ten listings of the idle branch", () => listings >= 10);
    expect(reads().slice(before)).toEqual([]);
    const watches = readAuditLog(w.auditLog).filter((e) => e.verb === "watch");
    expect(watches.length).toBeGreaterThan(0);
  });

  it("a GitTarget naming a GitProvider in another namespace that does not admit it is refused: no writes, no applier, Accepted=False; admitted, it is taken at once", {
    timeout: 60_000,
  }, async () => {
    w = await world({ appliedInitial: true });
    const TEAM = "team-b";
    await w.api
      .kubeConfig()
      .makeApiClient(k8s.CoreV1Api)
      .createNamespace({ body: { metadata: { name: TEAM } } });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    await waitFor("nothing left to decide", () => settled(w));
    const foreign = await secondTarget(w, "clusters/extra", { namespace: TEAM, providerNamespace: NS });
    const uid = foreign.metadata.uid as string;
    const read = async () =>
      (await w.custom.getNamespacedCustomObject({
        ...GROUP,
        plural: "gittargets",
        namespace: TEAM,
        name: "extra",
      })) as GitTarget;
    const condition = async (type: string) => (await read()).status?.conditions?.find((c) => c.type === type);
    await waitFor("Accepted=False", async () => (await condition("Accepted"))?.status === "False");
    for (const type of ["Accepted", "Ready"])
      expect(await condition(type)).toMatchObject({
        status: "False",
        reason: "ProviderNamespaceNotAllowed",
        message: `GitProvider ${NS}/gp does not admit namespace ${TEAM} (spec.accessFrom.namespaces)`,
      });
    expect((await read()).status?.publication).toBeUndefined();

    // A write that got past the door anyway is settled as refused, never published.
    const write: AcceptedWrite = {
      id: randomUUID(),
      target: { namespace: TEAM, name: "extra" },
      branchKey: w.key,
      path: "clusters/extra",
      acceptedAt: new Date().toISOString(),
      author: { name: "Eve", email: "eve@example.com" },
      changes: [
        {
          op: "upsert",
          object: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "x", namespace: TEAM }, data: {} },
        },
      ],
      save: true,
    };
    const branches = new Queue(QUEUES.branches, {
      connection: { url: w.redis.url, maxRetriesPerRequest: null },
      prefix: w.redis.prefix,
    });
    expect((await acceptWrite(w.redis.client, w.redis.prefix, write, branches)).accepted).toBe(true);
    await branches.close();
    const settledAs = await waitFor("the write settled", () => w.published(write.id));
    expect(settledAs).toMatch(/^refused: ProviderNamespaceNotAllowed/);
    expect(
      await show(w, (await w.git.tip("site")) as string, "clusters/extra/core/configmap/team-b/x.yaml"),
    ).toBe(undefined);
    // No applier attached: the decisions never list it, and its claim is sent nothing.
    await w.driver().idle();
    expect(w.driver().state.targets[uid]).toBeUndefined();
    expect(w.attempts).toHaveLength(0);

    // The provider admits the namespace: the worker takes the GitTarget at its next listing.
    await w.custom.patchNamespacedCustomObject(
      {
        ...GROUP,
        plural: "gitproviders",
        namespace: NS,
        name: "gp",
        body: { spec: { accessFrom: { namespaces: [TEAM] } } },
      },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
    );
    await waitFor("Accepted=True", async () => (await condition("Accepted"))?.status === "True");
    const attempt = await waitFor("its converge sent", () =>
      w.attempts.find((a) => a.claim.name === "claim2"),
    );
    expect(attempt.targets).toEqual([{ uid, namespace: TEAM, name: "extra", reason: "CatchUp" }]);
    await waitFor(
      "its publication status written",
      async () => (await read()).status?.publication?.commit !== undefined,
    );
    expect(await condition("Ready")).toMatchObject({ status: "True", reason: "Published" });
  });
});
