/**
 * When an applier is due, which due appliers may go now (one per source, oldest turn first), and
 * whether Git is ahead of the cluster.
 */
import type { ClaimRef } from "../contract.js";
import { type GovernanceHold, governanceHold } from "./governance.js";
import type { ApplierState, DecisionState, OperationOut, TargetState } from "./model.js";
import { hasPending, kindsPending } from "./reasons.js";
import { targetProven } from "./snapshots.js";

export function claimKey(c: ClaimRef): string {
  return `${c.kind}/${c.namespace}/${c.name}`;
}

/** The GitTargets naming an applier now, in a stable order. */
export function targetsNaming(state: DecisionState, key: string): TargetState[] {
  return Object.values(state.targets)
    .filter((t) => t.claim === key)
    .sort((a, b) => (a.uid < b.uid ? -1 : a.uid > b.uid ? 1 : 0));
}

/** Another applier on the same source with an operation out: its key and token, or undefined. */
function sourceBusy(state: DecisionState, a: ApplierState, key: string): [string, string] | undefined {
  for (const [k, o] of Object.entries(state.appliers).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)))
    if (k !== key && o.source === a.source && o.operation !== null) return [k, o.operation.token];
  return undefined;
}

/** Why an applier is not due, with what a person needs to act on it (`whyNotDue`). */
export type NotDue =
  | { hold: "unknown" }
  | { hold: "nothing pending" }
  | { hold: "operation out"; operation: OperationOut }
  /** Another applier reading the same source has an operation out: appliers of a source take turns. */
  | { hold: "source busy"; by: string; token: string }
  | { hold: "backoff"; until: number; failures: number }
  | { hold: "not named" }
  | { hold: "suspended"; targets: string[] }
  | GovernanceHold
  /** GitTargets naming it that are not proven (`targetProven`), each with what it lacks. */
  | { hold: "barrier"; targets: BarrierGap[] };

/** What keeps one GitTarget behind the barrier. */
export interface BarrierGap {
  uid: string;
  namespace: string;
  name: string;
  /** Its folder is not in the tip as the worker last read the tip's tree. */
  folder: boolean;
  /** The watch plane covers it and its initial snapshots of the current round are not published. */
  initialSnapshots: boolean;
}

/** What keeps one GitTarget behind the barrier, or null when it is proven (`targetProven`). */
export function barrierGap(t: TargetState, tip: string | null): BarrierGap | null {
  if (targetProven(t, tip)) return null;
  const folder = tip === null || (t.folderAt ?? null) !== tip;
  const watch = t.watch ?? null;
  return {
    uid: t.uid,
    namespace: t.namespace,
    name: t.name,
    folder,
    initialSnapshots: watch !== null && (t.initialSnapshotsAt ?? null) !== watch,
  };
}

/**
 * Why an applier is not due, or null when it is: a reason pending, no operation out, no applier
 * sharing its source with one out, past its backoff, named by a GitTarget, none of those GitTargets
 * suspended, no governance rule holding it (`governanceHold`), and past the barrier: every
 * GitTarget naming it is proven (`targetProven`): its folder in the tip, as the worker read the
 * tip's tree (an Argo CD Application must never sync a path that does not exist), and, where the
 * watch plane covers it, its initial snapshots published. The checks run in this order; the first
 * that holds is the answer.
 */
export function whyNotDue(state: DecisionState, key: string, now: number): NotDue | null {
  const a = state.appliers[key];
  if (a === undefined) return { hold: "unknown" };
  if (!hasPending(a.pending)) return { hold: "nothing pending" };
  if (a.operation !== null) return { hold: "operation out", operation: a.operation };
  const busy = sourceBusy(state, a, key);
  if (busy) return { hold: "source busy", by: busy[0], token: busy[1] };
  if (now < a.notBefore) return { hold: "backoff", until: a.notBefore, failures: a.failures };
  const named = targetsNaming(state, key);
  if (named.length === 0) return { hold: "not named" };
  // A suspended GitTarget freezes its folder: no apply for any reason until it resumes.
  const suspended = named.filter((t) => t.suspended);
  if (suspended.length > 0)
    return { hold: "suspended", targets: suspended.map((t) => `${t.namespace}/${t.name}`) };
  const held = governanceHold(state.tip, a, named, now);
  if (held) return held;
  const gaps = named.flatMap((t) => barrierGap(t, state.tip) ?? []);
  if (gaps.length > 0) return { hold: "barrier", targets: gaps };
  return null;
}

/** Why an applier is not due, in one word or phrase (`whyNotDue`'s `hold`), or null when it is. */
export function notDueBecause(state: DecisionState, key: string, now: number): string | null {
  return whyNotDue(state, key, now)?.hold ?? null;
}

/** What holds every due applier of the branch: no flush (and so no attempt) can start now. */
export type BranchHold =
  /** The first observation of the remote since the worker started (the baseline) is not in. */
  | { hold: "not observed" }
  /** The branch has no commit: nothing to apply. */
  | { hold: "empty branch" }
  /** A flush is publishing the pending writes; the attempts go once its push lands. */
  | { hold: "flush in progress"; since: number }
  /** The last flush could not publish; the next one waits for its backoff. */
  | { hold: "publication backoff"; until: number; failures: number };

/** What holds the branch's flush now, or null when a due applier would start one (`maybeFlush`). */
export function branchHold(state: DecisionState, now: number): BranchHold | null {
  if (!state.observed) return { hold: "not observed" };
  if (state.tip === null) return { hold: "empty branch" };
  if (state.flush !== null) return { hold: "flush in progress", since: state.flush.startedAt };
  if (now < state.flushNotBefore)
    return { hold: "publication backoff", until: state.flushNotBefore, failures: state.flushFailures };
  return null;
}

/**
 * The due appliers that may get an attempt now: of appliers sharing a source, only the one whose
 * last turn is oldest, so a busy applier cannot starve another.
 */
export function dueAppliers(state: DecisionState, now: number): string[] {
  const bySource = new Map<string, string>();
  for (const key of Object.keys(state.appliers).sort()) {
    if (notDueBecause(state, key, now) !== null) continue;
    const a = state.appliers[key] as ApplierState;
    const held = bySource.get(a.source);
    if (held === undefined || (state.appliers[held] as ApplierState).lastTurnAt > a.lastTurnAt) {
      bySource.set(a.source, key);
    }
  }
  return [...bySource.values()].sort();
}

/**
 * Git is ahead of the cluster while an applier has a ForeignCommit, Repair or Refusal pending, a
 * converge it may be asked for (every GitTarget naming it past the barrier), or an attempt out. An
 * adopt does not count: the cluster already runs those objects; nor does an apply a person asked
 * for (`Requested`): it applies what the cluster was last given. A converge held by the barrier
 * does not either: it waits for the initial snapshots, which must not wait for it.
 */
export function isGitAhead(state: DecisionState): boolean {
  return Object.entries(state.appliers).some(([key, a]) => {
    if (a.operation !== null) return true;
    const kinds = kindsPending(a.pending);
    if (kinds.some((k) => k !== "Adopt" && k !== "Requested" && k !== "Converge")) return true;
    if (!kinds.includes("Converge")) return false;
    const named = targetsNaming(state, key);
    return named.length > 0 && named.every((t) => targetProven(t, state.tip));
  });
}
