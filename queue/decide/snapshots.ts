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
 */
import type { SnapshotStamp } from "../contract.js";
import type { DecisionState, TargetState } from "./model.js";

/** How long a GitTarget's snapshots are held off from the first discard. */
export const SNAPSHOT_HOLD_MS = 5 * 60_000;
/** Snapshot ids a hold remembers per verdict (a snapshot's later writes get its verdict). */
const KEPT_IDS = 16;

/** A GitTarget's stale snapshots. */
export interface SnapshotHold {
  /** The first discard of the hold now running; null when none runs. */
  since: number | null;
  /** A fresh collection was asked for since the last discard. */
  recollectAsked: boolean;
  /** Snapshots discarded: every later write of one is discarded too. */
  discarded: string[];
  /** Snapshots used as stale under the bound: every later write of one is used too. */
  used: string[];
}

/**
 * `exempt`: initial, or no trigger on the branch. `fresh`: collected and arriving while Git was not
 * ahead, in one epoch. `discarded`: stale, held. `used`: stale, let through by the 5-minute bound.
 */
export type SnapshotVerdict = "exempt" | "fresh" | "discarded" | "used";

export interface SnapshotJudgement {
  verdict: SnapshotVerdict;
  /** The hold after it. */
  hold: SnapshotHold;
  /** The first verdict on this snapshot that counts in `stale_snapshots_total` (discarded, used). */
  counted: boolean;
}

export const emptyHold = (): SnapshotHold => ({
  since: null,
  recollectAsked: false,
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
  const h = structuredClone(hold ?? emptyHold());
  if (h.discarded.includes(stamp.id)) return { verdict: "discarded", hold: h, counted: false };
  if (h.used.includes(stamp.id)) return { verdict: "used", hold: h, counted: false };
  if (stamp.initial || !view.triggered) return { verdict: "exempt", hold: h, counted: false };
  const stale = stamp.gitAhead || stamp.epoch !== view.epoch || view.gitAhead;
  if (!stale) return { verdict: "fresh", hold: { ...h, since: null, recollectAsked: false }, counted: false };
  if (h.since !== null && now >= h.since + SNAPSHOT_HOLD_MS)
    return {
      verdict: "used",
      hold: { ...h, since: null, recollectAsked: false, used: remember(h.used, stamp.id) },
      counted: true,
    };
  return {
    verdict: "discarded",
    hold: { ...h, since: h.since ?? now, recollectAsked: false, discarded: remember(h.discarded, stamp.id) },
    counted: true,
  };
}

/**
 * Whether the GitTarget's held snapshots are to be collected again now: once Git is no longer
 * ahead (the apply they waited for is done), or once the bound passed (then used whatever it says).
 */
export function recollectDue(hold: SnapshotHold | undefined, gitAhead: boolean, now: number): boolean {
  if (!hold || hold.since === null || hold.recollectAsked) return false;
  return !gitAhead || now >= hold.since + SNAPSHOT_HOLD_MS;
}

/** When a held GitTarget's bound passes (for the wake), or null. */
export function holdEndsAt(hold: SnapshotHold | undefined): number | null {
  return hold && hold.since !== null && !hold.recollectAsked ? hold.since + SNAPSHOT_HOLD_MS : null;
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
