/**
 * The decisions explained: for a branch's decision state at a moment, what each applier waits for
 * and why it gets no attempt now, in the words of the rules that decide it (`whyNotDue`,
 * `branchHold`, `dueAppliers`). Nothing here decides: it reads the same functions the step runs, so
 * what `applygate status` says is what the worker would do (pure).
 */
import type { ApplierRef, ClaimRef, Reason } from "../contract.js";
import {
  type BarrierGap,
  type BranchHold,
  barrierGap,
  branchHold,
  dueAppliers,
  type NotDue,
  targetsNaming,
  whyNotDue,
} from "./due.js";
import type { DecisionState, OperationOut, PendingKind, RetryView } from "./model.js";
import { kindsPending, reasonForTarget } from "./reasons.js";
import { retryView } from "./retry-view.js";

/** Why a due applier gets no attempt now: another applier of its source goes first. */
export interface TurnHold {
  hold: "turn";
  /** The applier (claim key) whose turn it is. */
  of: string;
}

/** The first thing that keeps an applier from an attempt now; null: one goes at this step. */
export type Waiting = NotDue | TurnHold | BranchHold;

export interface ApplierExplanation {
  key: string;
  claim: ClaimRef;
  applier: ApplierRef;
  /** Every kind pending, highest precedence first. */
  pending: PendingKind[];
  /** The reason each GitTarget naming it would carry in the next attempt (none: nothing for it). */
  reasons: { uid: string; namespace: string; name: string; reason: Reason }[];
  operation: Pick<OperationOut, "token" | "commit" | "phase" | "sentAt"> | null;
  lastAppliedCommit: string | null;
  /** Consecutive attempts that did not succeed. */
  failures: number;
  /** What it waits for before its next attempt (the claim's Retrying condition), or null. */
  retry: RetryView | null;
  /**
   * applying: an operation out (whatever is pending meanwhile). idle: nothing pending. held: a
   * reason pending and a rule holds it (`whyNotDue`). due: due, waiting only for its turn or the
   * branch (`waiting` says which).
   */
  state: "idle" | "applying" | "held" | "due";
  waiting: Waiting | null;
}

export interface TargetExplanation {
  uid: string;
  namespace: string;
  name: string;
  /** The claim (key) it names, or null. */
  claim: string | null;
  suspended: boolean;
  path?: string;
  /** What keeps it behind the barrier, or null when it is proven. */
  barrier: BarrierGap | null;
  /** Its snapshots are held while Git is ahead, since then (null: not held). */
  snapshotsHeldSince: number | null;
  /** Pending writes decided for its folder and not yet published. */
  unpublished: number;
}

export interface BranchExplanation {
  branch: DecisionState["branch"];
  tip: string | null;
  hold: BranchHold | null;
  /** Pending writes decided and not yet published, over every GitTarget. */
  unpublished: number;
  appliers: ApplierExplanation[];
  targets: TargetExplanation[];
}

function waitingOf(
  state: DecisionState,
  key: string,
  now: number,
  due: readonly string[],
  hold: BranchHold | null,
): Waiting | null {
  const notDue = whyNotDue(state, key, now);
  // Nothing pending while an operation is out: what it waits for is that operation's end.
  const op = state.appliers[key]?.operation;
  if (notDue?.hold === "nothing pending" && op) return { hold: "operation out", operation: op };
  if (notDue) return notDue;
  if (!due.includes(key)) {
    const source = state.appliers[key]?.source;
    const of = due.find((k) => state.appliers[k]?.source === source);
    if (of !== undefined) return { hold: "turn", of };
  }
  return hold;
}

function stateOf(w: Waiting | null): ApplierExplanation["state"] {
  if (w === null) return "due";
  if (w.hold === "nothing pending") return "idle";
  if (w.hold === "operation out") return "applying";
  if (w.hold === "turn" || w.hold === "not observed" || w.hold === "empty branch") return "due";
  if (w.hold === "flush in progress" || w.hold === "publication backoff") return "due";
  return "held";
}

const byKey = <T>(entries: [string, T][]) => entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));

/** Explains a branch's decisions at `now`. */
export function explainBranch(state: DecisionState, now: number): BranchExplanation {
  const hold = branchHold(state, now);
  const due = dueAppliers(state, now);
  const appliers = byKey(Object.entries(state.appliers)).map(([key, a]): ApplierExplanation => {
    const waiting = waitingOf(state, key, now, due, hold);
    const reasons = targetsNaming(state, key).flatMap((t) => {
      const reason = reasonForTarget(a.pending, t.uid);
      return reason ? [{ uid: t.uid, namespace: t.namespace, name: t.name, reason }] : [];
    });
    const op = a.operation;
    return {
      key,
      claim: a.claim,
      applier: a.applier,
      pending: kindsPending(a.pending),
      reasons,
      operation: op && { token: op.token, commit: op.commit, phase: op.phase, sentAt: op.sentAt },
      lastAppliedCommit: a.lastAppliedCommit,
      failures: a.failures,
      retry: retryView(state, a, now),
      state: op ? "applying" : stateOf(waiting),
      waiting,
    };
  });
  const targets = byKey(Object.entries(state.targets)).map(
    ([, t]): TargetExplanation => ({
      uid: t.uid,
      namespace: t.namespace,
      name: t.name,
      claim: t.claim,
      suspended: t.suspended,
      ...(t.path !== undefined ? { path: t.path } : {}),
      barrier: barrierGap(t, state.tip),
      snapshotsHeldSince: t.snapshots?.since ?? null,
      unpublished: state.unpublished.filter((w) => w.targetUid === t.uid).length,
    }),
  );
  return {
    branch: state.branch,
    tip: state.tip,
    hold,
    unpublished: state.unpublished.length,
    appliers,
    targets,
  };
}
