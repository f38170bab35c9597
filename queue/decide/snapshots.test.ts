/**
 * Snapshots while Git is ahead, and the one barrier: each case on an injected clock, through
 * `step` as the worker's shell feeds it.
 */
import { describe, expect, it } from "vitest";
import { Driver, flushes, listed, report, sends, sha } from "../../test/support/decisions.js";
import type { SnapshotStamp } from "../contract.js";
import { isGitAhead } from "./due.js";
import type { DecisionAction, DecisionState } from "./model.js";
import {
  holdEndsAt,
  judgeSnapshot,
  RECOLLECT_AGAIN_MS,
  SNAPSHOT_HOLD_MS,
  targetProven,
} from "./snapshots.js";

const A = sha(1);
const B = sha(2);

const epochOf = (s: DecisionState) => s.applyEpoch ?? 0;
const stamp = (id: string, d: Driver, more: Partial<SnapshotStamp> = {}): SnapshotStamp => ({
  id,
  epoch: epochOf(d.state),
  gitAhead: isGitAhead(d.state),
  initial: false,
  ...more,
});
const settleOf = (actions: DecisionAction[]) => actions.find((a) => a.type === "SettleSnapshotWrite");
const recollects = (actions: DecisionAction[]) => actions.filter((a) => a.type === "Recollect");
let writes = 0;
const write = (d: Driver, s: SnapshotStamp, uid = "u1") =>
  d.on({ type: "SnapshotWrite", writeId: `w${++writes}`, targetUid: uid, snapshot: s });

/**
 * A branch whose applier applied A, with a push B pending an apply: Git is ahead. `watch`: a live
 * mirror covers the GitTarget (its coverage token), its initial snapshots published.
 */
function ahead(watch?: string): { d: Driver; out: DecisionAction[] } {
  const d = new Driver();
  const target = listed("u1", "app", watch ? { watch } : {});
  if (watch) {
    d.on({ type: "TargetsListed", targets: [target] });
    d.on({ type: "InitialSnapshotsPublished", targetUid: "u1", token: watch });
  }
  d.settle([target], A);
  const out = d.on({ type: "Observed", tip: B, pushedByUs: false });
  expect(isGitAhead(d.state)).toBe(true);
  return { d, out };
}

describe("a snapshot collected while Git is ahead, or across an apply", () => {
  it("is discarded when it was collected while Git was ahead, and all of it with it", () => {
    const { d } = ahead();
    const s = stamp("snap-1", d);
    expect(s.gitAhead).toBe(true);
    expect(settleOf(write(d, s))).toMatchObject({ use: false, verdict: "discarded", counted: true });
    // The snapshot's next write is discarded too, and not counted again.
    expect(settleOf(write(d, s))).toMatchObject({ use: false, verdict: "discarded", counted: false });
    expect(d.state.targets.u1?.snapshots?.since).toBe(d.now);
  });

  it("is discarded when it arrives while Git is ahead, though collected before", () => {
    const d = new Driver();
    d.settle([listed("u1", "app")], A);
    const s = stamp("snap-1", d);
    expect(s).toMatchObject({ gitAhead: false });
    d.on({ type: "Observed", tip: B, pushedByUs: false });
    expect(settleOf(write(d, s))).toMatchObject({ use: false, verdict: "discarded" });
  });

  it("is discarded across an epoch change: an apply was sent and ended while it was collected", () => {
    const { d, out } = ahead();
    const before = stamp("snap-1", d, { gitAhead: false });
    const [att] = sends(d.publish(out, B));
    d.on(report(att?.token ?? "", "app", "Succeeded", B));
    expect(isGitAhead(d.state)).toBe(false);
    expect(epochOf(d.state)).toBeGreaterThan(before.epoch ?? 0);
    expect(settleOf(write(d, before))).toMatchObject({ use: false, verdict: "discarded", counted: true });
    // One collected in the epoch now, while Git is not ahead, is used.
    expect(settleOf(write(d, stamp("snap-2", d)))).toMatchObject({ use: true, verdict: "fresh" });
    expect(d.state.targets.u1?.snapshots?.since).toBeNull();
  });

  it("an unknown epoch (none published when it was collected) is stale", () => {
    const d = new Driver();
    d.settle([listed("u1", "app")], A);
    expect(settleOf(write(d, stamp("snap-1", d, { epoch: null })))).toMatchObject({ verdict: "discarded" });
  });

  it("an initial snapshot is never held, however far ahead Git is", () => {
    const { d } = ahead();
    const s = stamp("snap-1", d, { initial: true });
    expect(settleOf(write(d, s))).toMatchObject({ use: true, verdict: "exempt", counted: false });
    expect(d.state.targets.u1?.snapshots).toBeUndefined();
  });

  it("a branch with no trigger never waits", () => {
    const d = new Driver();
    d.settle([listed("u1", null)], A);
    const s = stamp("snap-1", d, { gitAhead: true, epoch: 99 });
    expect(settleOf(write(d, s))).toMatchObject({ use: true, verdict: "exempt" });
  });

  it("is collected again after the apply: once Git is no longer ahead the watch plane is asked (no mirror: once)", () => {
    const { d, out } = ahead();
    const sent = d.publish(out, B);
    const [att] = sends(sent);
    write(d, stamp("snap-1", d));
    // The attempt is out: Git is still ahead, nothing is asked yet.
    expect(recollects(d.advance(1000))).toEqual([]);
    const after = d.on(report(att?.token ?? "", "app", "Succeeded", B));
    expect(recollects(after)).toEqual([
      { type: "Recollect", target: { uid: "u1", namespace: "apps", name: "gt-u1" }, bound: false },
    ]);
    expect(recollects(d.advance(1000))).toEqual([]);
    // The fresh collection is used and ends the hold.
    expect(settleOf(write(d, stamp("snap-2", d)))).toMatchObject({ use: true, verdict: "fresh" });
  });

  it("is used after 5 minutes from the first discard: a fresh snapshot is asked for then, used and counted", () => {
    const { d, out } = ahead();
    // The apply never ends: Git stays ahead.
    d.publish(out, B);
    const start = d.now;
    expect(settleOf(write(d, stamp("snap-1", d)))).toMatchObject({ verdict: "discarded" });
    d.now += 60_000;
    expect(settleOf(write(d, stamp("snap-2", d)))).toMatchObject({ verdict: "discarded", counted: true });
    // A wake is asked for the bound, which counts from the first discard.
    expect(
      d.log.filter((a) => a.type === "ScheduleWake").map((a) => a.type === "ScheduleWake" && a.at),
    ).toContain(start + SNAPSHOT_HOLD_MS);
    expect(recollects(d.advance(start + SNAPSHOT_HOLD_MS - 1 - d.now))).toEqual([]);
    expect(recollects(d.advance(1))).toEqual([
      { type: "Recollect", target: { uid: "u1", namespace: "apps", name: "gt-u1" }, bound: true },
    ]);
    expect(isGitAhead(d.state)).toBe(true);
    const s3 = stamp("snap-3", d);
    expect(settleOf(write(d, s3))).toMatchObject({ use: true, verdict: "used", counted: true });
    expect(settleOf(write(d, s3))).toMatchObject({ use: true, verdict: "used", counted: false });
    // The hold ended with it: the next stale snapshot starts a new one.
    expect(settleOf(write(d, stamp("snap-4", d)))).toMatchObject({ verdict: "discarded", counted: true });
    expect(d.state.targets.u1?.snapshots?.since).toBe(d.now);
  });

  it("judgeSnapshot is pure: the hold given is not changed", () => {
    const hold = { since: 5, recollectAskedAt: 7, discarded: [], used: [] };
    const s: SnapshotStamp = { id: "x", epoch: 1, gitAhead: true, initial: false };
    const j = judgeSnapshot(hold, s, { epoch: 1, gitAhead: false, triggered: true }, 10);
    expect(j.verdict).toBe("discarded");
    expect(hold).toEqual({ since: 5, recollectAskedAt: 7, discarded: [], used: [] });
  });
});

describe("an ask for a fresh collection that no snapshot answers", () => {
  const asked = { type: "Recollect", target: { uid: "u1", namespace: "apps", name: "gt-u1" }, bound: false };

  /** Git ahead, a snapshot discarded, the apply ended: the first ask is out at the returned time. */
  function askedOnce(watch?: string): { d: Driver; at: number } {
    const { d, out } = ahead(watch);
    const [att] = sends(d.publish(out, B));
    write(d, stamp("snap-1", d));
    expect(recollects(d.on(report(att?.token ?? "", "app", "Succeeded", B)))).toEqual([asked]);
    return { d, at: d.now };
  }

  it("is asked again every RECOLLECT_AGAIN_MS while a mirror covers the GitTarget, until a snapshot ends the hold", () => {
    const { d, at } = askedOnce("m1:1");
    // The step wakes for the repeat (or sooner, for a deadline of its own).
    expect(holdEndsAt(d.state.targets.u1?.snapshots, true, d.now)).toBe(at + RECOLLECT_AGAIN_MS);
    expect(d.state.wakeAt).toBeLessThanOrEqual(at + RECOLLECT_AGAIN_MS);
    expect(recollects(d.advance(RECOLLECT_AGAIN_MS - 1))).toEqual([]);
    expect(recollects(d.advance(1))).toEqual([asked]);
    expect(recollects(d.advance(RECOLLECT_AGAIN_MS - 1))).toEqual([]);
    expect(recollects(d.advance(1))).toEqual([asked]);
    // The answer comes: used, the hold ends, nothing is asked any more.
    expect(settleOf(write(d, stamp("snap-2", d)))).toMatchObject({ use: true, verdict: "fresh" });
    expect(recollects(d.advance(10 * RECOLLECT_AGAIN_MS))).toEqual([]);
  });

  it("is not asked again while no mirror covers the GitTarget, and is once the listing shows one", () => {
    const { d } = askedOnce();
    expect(recollects(d.advance(10 * RECOLLECT_AGAIN_MS))).toEqual([]);
    expect(holdEndsAt(d.state.targets.u1?.snapshots, false, d.now)).toBeNull();
    expect(
      recollects(d.on({ type: "TargetsListed", targets: [listed("u1", "app", { watch: "m2:1" })] })),
    ).toEqual([asked]);
  });

  it("a discard after an ask starts over: the next ask waits for the apply, not the repeat", () => {
    const { d } = askedOnce("m1:1");
    // Another push before the answer: its snapshot is discarded while Git is ahead again.
    const out = d.on({ type: "Observed", tip: sha(3), pushedByUs: false });
    expect(isGitAhead(d.state)).toBe(true);
    expect(settleOf(write(d, stamp("snap-2", d)))).toMatchObject({ verdict: "discarded" });
    expect(d.state.targets.u1?.snapshots?.recollectAskedAt).toBeNull();
    expect(recollects(d.advance(2 * RECOLLECT_AGAIN_MS))).toEqual([]);
    const [att] = sends(d.publish(out, sha(3)));
    expect(recollects(d.on(report(att?.token ?? "", "app", "Succeeded", sha(3))))).toEqual([asked]);
  });

  it("a hold saved before asks were repeated (recollectAsked) is asked once more", () => {
    const { d } = askedOnce("m1:1");
    const hold = d.state.targets.u1?.snapshots as unknown as Record<string, unknown>;
    delete hold.recollectAskedAt;
    hold.recollectAsked = true;
    expect(recollects(d.advance(1))).toEqual([asked]);
  });
});

describe("holdEndsAt", () => {
  const hold = (since: number | null, recollectAskedAt: number | null = null) => ({
    since,
    recollectAskedAt,
    discarded: [],
    used: [],
  });

  it("is the bound while nothing was asked, the repeat or the bound once asked, nothing past both", () => {
    expect(holdEndsAt(undefined, true, 0)).toBeNull();
    expect(holdEndsAt(hold(null), true, 0)).toBeNull();
    expect(holdEndsAt(hold(100), false, 100)).toBe(100 + SNAPSHOT_HOLD_MS);
    expect(holdEndsAt(hold(100, 200), true, 200)).toBe(200 + RECOLLECT_AGAIN_MS);
    expect(holdEndsAt(hold(100, 200), false, 200)).toBeNull();
    // The repeat passed, Git ahead again: the bound is still ahead.
    expect(holdEndsAt(hold(100, 200), true, 200 + RECOLLECT_AGAIN_MS)).toBe(100 + SNAPSHOT_HOLD_MS);
    expect(holdEndsAt(hold(100, 200), true, 100 + SNAPSHOT_HOLD_MS)).toBeNull();
  });
});

describe("one barrier: the folder in the tip and, where the watch plane covers it, its initial snapshots", () => {
  const watched = (token: string | undefined) => listed("u1", "app", token ? { watch: token } : {});

  it("a GitTarget a live mirror covers is asked for nothing until its initial snapshots are published", () => {
    const d = new Driver();
    d.on({ type: "TargetsListed", targets: [watched("m1:1")] });
    // The baseline converge is pending, the folder is in the tip: held by the snapshots alone.
    expect(flushes(d.on({ type: "Observed", tip: A, pushedByUs: false }))).toEqual([]);
    expect(targetProven(d.state.targets.u1!, A)).toBe(false);
    // A converge held by the barrier is not Git ahead: the initial snapshots do not wait for it.
    expect(isGitAhead(d.state)).toBe(false);
    // Another round's snapshots prove nothing.
    expect(flushes(d.on({ type: "InitialSnapshotsPublished", targetUid: "u1", token: "m0:3" }))).toEqual([]);
    const out = d.on({ type: "InitialSnapshotsPublished", targetUid: "u1", token: "m1:1" });
    expect(flushes(out)).toHaveLength(1);
    expect(sends(d.publish(out, A)).map((a) => a.targets[0]?.reason)).toEqual(["CatchUp"]);
  });

  it("a GitTarget no live mirror covers keeps the folder barrier alone", () => {
    const d = new Driver();
    d.on({ type: "TargetsListed", targets: [watched(undefined)] });
    expect(flushes(d.on({ type: "Observed", tip: A, pushedByUs: false }))).toHaveLength(1);
  });

  it("published snapshots do not prove a folder the tip lacks", () => {
    const d = new Driver();
    d.absent.add("u1");
    d.on({ type: "TargetsListed", targets: [watched("m1:1")] });
    d.on({ type: "Observed", tip: A, pushedByUs: false });
    expect(flushes(d.on({ type: "InitialSnapshotsPublished", targetUid: "u1", token: "m1:1" }))).toEqual([]);
  });

  it("a new round (the mirror restarted, a rule was added) holds again until its snapshots are published", () => {
    const d = new Driver();
    d.on({ type: "TargetsListed", targets: [watched("m1:1")] });
    d.on({ type: "Observed", tip: A, pushedByUs: false });
    const out = d.on({ type: "InitialSnapshotsPublished", targetUid: "u1", token: "m1:1" });
    const [att] = sends(d.publish(out, A));
    d.on(report(att?.token ?? "", "app", "Succeeded", A));
    d.on({ type: "TargetsListed", targets: [watched("m2:1")] });
    // A push arrives while the new mirror's snapshots are being collected: it waits for them.
    expect(flushes(d.on({ type: "Observed", tip: B, pushedByUs: false }))).toEqual([]);
    expect(flushes(d.on({ type: "InitialSnapshotsPublished", targetUid: "u1", token: "m2:1" }))).toHaveLength(
      1,
    );
  });

  it("the mirror's started marker covers the GitTarget before any listing reads its coverage", () => {
    const d = new Driver();
    d.on({ type: "TargetsListed", targets: [watched(undefined)] });
    d.on({ type: "InitialSnapshotsStarted", targetUid: "u1", token: "m1:1" });
    expect(flushes(d.on({ type: "Observed", tip: A, pushedByUs: false }))).toEqual([]);
    expect(flushes(d.on({ type: "InitialSnapshotsPublished", targetUid: "u1", token: "m1:1" }))).toHaveLength(
      1,
    );
  });

  it("a mirror gone (its coverage expired) no longer holds the folder", () => {
    const d = new Driver();
    d.on({ type: "TargetsListed", targets: [watched("m1:1")] });
    expect(flushes(d.on({ type: "Observed", tip: A, pushedByUs: false }))).toEqual([]);
    expect(flushes(d.on({ type: "TargetsListed", targets: [watched(undefined)] }))).toHaveLength(1);
  });
});
