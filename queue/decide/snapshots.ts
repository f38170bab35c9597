/**
 * Snapshots while Git is ahead, and the initial-snapshot barrier (pure).
 *
 * A snapshot mirrors live state. While a commit is pushed and not yet applied, the cluster holds
 * the old state of every object it changes; a snapshot collected then, or across an apply (the
 * apply epoch moved while it was collected), would write that old state back and revert the push.
 * Such a snapshot is discarded and collected again once Git is no longer ahead, except:
 * - an initial snapshot (the first of its collection): the startup baseline, which the barrier
 *   waits for, so holding it for an apply would wait on itself;
 * - a branch with no trigger: nothing applies its commits;
 * - a GitTarget whose snapshots have been held `SNAPSHOT_HOLD_MS` from the first discard: a fresh
 *   snapshot is asked for then and used, logged and counted, so an apply that keeps failing
 *   cannot leave drift unmirrored for as long as it fails.
 *
 * An ask reaches the watch plane at most once (a Redis PUBLISH, sent after the state that records
 * it is saved): a mirror reconnecting, a collection that failed, or an owner that lost the branch
 * between the save and the publish loses it. So it is asked again every `RECOLLECT_AGAIN_MS`
 * until a snapshot ends the hold.
 */
import type { SnapshotStamp } from "../contract.js";
import { copy } from "./copy.js";
import type { DecisionState, SnapshotHold, SnapshotVerdict, TargetState } from "./model.js";

export type { SnapshotHold, SnapshotVerdict };

/** How long a GitTarget's snapshots are held off from the first discard. */
export const SNAPSHOT_HOLD_MS = 5 * 60_000;
/** How long an ask for a fresh collection waits for its snapshot before it is asked again. */
export const RECOLLECT_AGAIN_MS = 15_000;
/** Snapshot ids a hold remembers per verdict (a snapshot's later writes get its verdict). */
const KEPT_IDS = 16;

export interface SnapshotJudgement {
  verdict: SnapshotVerdict;
  /** The hold after it. */
  hold: SnapshotHold;
  /** The first verdict on this snapshot that counts in `stale_snapshots_total` (discarded, used). */
  counted: boolean;
}

export const emptyHold = (): SnapshotHold => ({
  since: null,
  recollectAskedAt: null,
  discarded: [],
  used: [],
});

const remember = (ids: string[], id: string) => (ids.includes(id) ? ids : [...ids, id].slice(-KEPT_IDS));

/**
 * One snapshot write of a GitTarget, judged. `now` is the worker's view when it arrives: its apply
 * epoch, whether Git is ahead, whether the branch has a trigger.
 */
export function judgeSnapshot(
  hold: SnapshotHold | undefined,
  stamp: SnapshotStamp,
  view: { epoch: number; gitAhead: boolean; triggered: boolean },
  now: number,
): SnapshotJudgement {
  const h = copy(hold ?? emptyHold());
  if (h.discarded.includes(stamp.id)) return { verdict: "discarded", hold: h, counted: false };
  if (h.used.includes(stamp.id)) return { verdict: "used", hold: h, counted: false };
  if (stamp.initial || !view.triggered) return { verdict: "exempt", hold: h, counted: false };
  const stale = stamp.gitAhead || stamp.epoch !== view.epoch || view.gitAhead;
  if (!stale)
    return { verdict: "fresh", hold: { ...h, since: null, recollectAskedAt: null }, counted: false };
  if (h.since !== null && now >= h.since + SNAPSHOT_HOLD_MS)
    return {
      verdict: "used",
      hold: { ...h, since: null, recollectAskedAt: null, used: remember(h.used, stamp.id) },
      counted: true,
    };
  return {
    verdict: "discarded",
    hold: { ...h, since: h.since ?? now, recollectAskedAt: null, discarded: remember(h.discarded, stamp.id) },
    counted: true,
  };
}

/**
 * Whether the GitTarget's held snapshots are to be collected again now: once Git is no longer
 * ahead (the apply they waited for is done), or once the bound passed (then used whatever it says);
 * and again `RECOLLECT_AGAIN_MS` after an ask no snapshot answered, while a live mirror covers the
 * GitTarget (`covered`): nobody would hear it otherwise, and the listing that shows a mirror
 * covering it again brings the next ask.
 */
export function recollectDue(
  hold: SnapshotHold | undefined,
  view: { gitAhead: boolean; covered: boolean },
  now: number,
): boolean {
  if (!hold || hold.since === null) return false;
  const askedAt = hold.recollectAskedAt ?? null;
  if (askedAt !== null && (!view.covered || now < askedAt + RECOLLECT_AGAIN_MS)) return false;
  return !view.gitAhead || now >= hold.since + SNAPSHOT_HOLD_MS;
}

/**
 * When a held GitTarget next needs a look after `now` (for the wake): an ask's repeat, or its
 * bound; null when neither is ahead.
 */
export function holdEndsAt(hold: SnapshotHold | undefined, covered: boolean, now: number): number | null {
  if (!hold || hold.since === null) return null;
  const askedAt = hold.recollectAskedAt ?? null;
  if (askedAt !== null && !covered) return null;
  const times = [hold.since + SNAPSHOT_HOLD_MS];
  if (askedAt !== null) times.push(askedAt + RECOLLECT_AGAIN_MS);
  const ahead = times.filter((t) => t > now);
  return ahead.length === 0 ? null : Math.min(...ahead);
}

/** A branch has a trigger when some GitTarget names a claim holding an applier. */
export function hasTrigger(state: DecisionState): boolean {
  return Object.values(state.targets).some((t) => t.claim !== null && state.appliers[t.claim] !== undefined);
}

/**
 * The one barrier: a GitTarget is proven, and its applier may be asked for something, only while
 * the tip's tree holds its folder (read by the worker at the tip now) and, where the watch plane
 * covers it (a WatchRule names it and its mirror is alive: `watch` is that mirror's coverage
 * token), once the mirror's initial snapshots of that token are published.
 */
export function targetProven(t: TargetState, tip: string | null): boolean {
  if (tip === null || (t.folderAt ?? null) !== tip) return false;
  const watch = t.watch ?? null;
  return watch === null || (t.initialSnapshotsAt ?? null) === watch;
}
