/**
 * Terminating a stale operation, only on proof (pure). An operation of ours still running for a
 * commit that is a proven ancestor of the newer commit we must sync can only ever apply an older
 * state; waiting it out would hold the newer sync for nothing. Everything short of proof is left
 * alone, because Argo CD never retries a terminated operation: terminating the wrong one loses
 * that sync for good. Never terminated: somebody else's operation, one that is not running (not
 * started, already terminating, completed), one with no revision, a symbolic revision (a branch or
 * tag name can move), the very commit we must sync, and a commit the clone does not know or that
 * is not an ancestor (a descendant is newer than what we were asked for).
 */
import type { KObject } from "../../queue/kube/index.js";
import { type Ancestry as AncestryAnswer, judgeSupersession } from "../../queue/supersession.js";
import { isCompletedPhase, operationOf, stateOf, tokenOf } from "./application.js";

/** What a Git clone says of `revision` against the newer commit (`queue/decide/supersede.ts`). */
export type { AncestryAnswer };

/**
 * Asks the clone: is `revision` (a full or abbreviated commit id) an ancestor of `commit`? It
 * answers "unknown" for a revision it cannot resolve to exactly one commit it holds.
 */
export type Ancestry = (revision: string, commit: string, about?: AncestryAbout) => Promise<AncestryAnswer>;

/** Which repository the question is about: the Application being synced and the claim holding it. */
export interface AncestryAbout {
  application: KObject;
  claim: { namespace: string; name: string };
}

/** Why a running operation is left alone (never written anywhere: the decision is all). */
export type LeaveCause =
  | "NoOperation"
  | "Foreign"
  | "NotStarted"
  | "AlreadyTerminating"
  | "Completed"
  | "NoRevision"
  | "SameCommit"
  | "Symbolic"
  | "Unknown"
  | "NotAncestor";

export type StaleDecision =
  | { action: "leave"; why: LeaveCause }
  /** Ask the clone about this revision, then decide again with the answer. */
  | { action: "prove"; revision: string; token: string }
  /** Set status.operationState.phase to Terminating, guarded by this resourceVersion. */
  | { action: "terminate"; revision: string; token: string; resourceVersion: string };

/** The revision the running operation syncs: its pinned revision, else the resolved one. */
export function runningRevision(app: KObject): string | undefined {
  const state = stateOf(app);
  const pinned = state?.operation?.sync?.revision ?? operationOf(app)?.sync?.revision;
  const resolved = state?.syncResult?.revision;
  const rev = (pinned || resolved || "").trim();
  return rev === "" ? undefined : rev;
}

export function decideStale(app: KObject, commit: string, proof?: AncestryAnswer): StaleDecision {
  const op = operationOf(app);
  if (!op) return { action: "leave", why: "NoOperation" };
  const token = tokenOf(op);
  if (!token) return { action: "leave", why: "Foreign" };
  const state = stateOf(app);
  // Argo CD terminates the operation state; a state that is not this operation's is not ours to end.
  if (!state || tokenOf(state.operation) !== token) return { action: "leave", why: "NotStarted" };
  if (state.phase === "Terminating") return { action: "leave", why: "AlreadyTerminating" };
  if (isCompletedPhase(state.phase) || state.phase !== "Running")
    return { action: "leave", why: "Completed" };
  const revision = runningRevision(app) ?? "";
  // The same rule the branch worker judged the operation superseded by.
  const v = judgeSupersession(revision, commit, proof);
  if (v.verdict === "prove") return { action: "prove", revision, token };
  if (v.verdict === "not-superseded") return { action: "leave", why: v.why === "NoTip" ? "Unknown" : v.why };
  const resourceVersion = app.metadata.resourceVersion;
  if (!resourceVersion) return { action: "leave", why: "Unknown" };
  return { action: "terminate", revision, token, resourceVersion };
}

/** The merge patch Argo CD's TerminateOperation makes: the operation state's phase. */
export function terminatePatch(): Record<string, unknown> {
  return { status: { operationState: { phase: "Terminating" } } };
}
