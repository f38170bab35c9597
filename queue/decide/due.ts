/**
 * When an applier is due, which due appliers may go now (one per source, oldest turn first), and
 * whether Git is ahead of the cluster.
 */
import type { ClaimRef } from "../contract.js";
import { governanceHolds } from "./governance.js";
import type { ApplierState, DecisionState, TargetState } from "./model.js";
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

function sourceBusy(state: DecisionState, a: ApplierState, key: string): boolean {
  return Object.entries(state.appliers).some(
    ([k, o]) => k !== key && o.source === a.source && o.operation !== null,
  );
}

/**
 * Why an applier is not due, or null when it is: a reason pending, no operation out, no applier
 * sharing its source with one out, past its backoff, named by a GitTarget, none of those GitTargets
 * suspended, no governance rule holding it (`governanceHolds`), and past the barrier: every
 * GitTarget naming it is proven (`targetProven`): its folder in the tip, as the worker read the
 * tip's tree (an Argo CD Application must never sync a path that does not exist), and, where the
 * watch plane covers it, its initial snapshots published.
 */
export function notDueBecause(state: DecisionState, key: string, now: number): string | null {
  const a = state.appliers[key];
  if (a === undefined) return "unknown";
  if (!hasPending(a.pending)) return "nothing pending";
  if (a.operation !== null) return "operation out";
  if (sourceBusy(state, a, key)) return "source busy";
  if (now < a.notBefore) return "backoff";
  const named = targetsNaming(state, key);
  if (named.length === 0) return "not named";
  // A suspended GitTarget freezes its folder: no apply for any reason until it resumes.
  if (named.some((t) => t.suspended)) return "suspended";
  const held = governanceHolds(state.tip, a, named, now);
  if (held) return held;
  if (!named.every((t) => targetProven(t, state.tip))) return "barrier";
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
 * adopt does not count: the cluster already runs those objects. A converge held by the barrier
 * does not either: it waits for the initial snapshots, which must not wait for it.
 */
export function isGitAhead(state: DecisionState): boolean {
  return Object.entries(state.appliers).some(([key, a]) => {
    if (a.operation !== null) return true;
    const kinds = kindsPending(a.pending);
    if (kinds.some((k) => k !== "Adopt" && k !== "Converge")) return true;
    if (!kinds.includes("Converge")) return false;
    const named = targetsNaming(state, key);
    return named.length > 0 && named.every((t) => targetProven(t, state.tip));
  });
}
