/**
 * How an apply attempt shows as a BullMQ job on `attempts-<kind>` (pure): what a person opening
 * the queue dashboard needs, without changing what the job carries (its data is the Attempt, the
 * contract) or how the branch worker learns an outcome (the reports queue, never the job's state).
 *
 * - Its name says the branch, the applier and the commit; its id stays the operation token.
 * - Its progress is the operation's last phase with the reason and message, and says `stuck` once
 *   the operation went Unresolved (past its deadline, still followed); its log has a line a phase.
 * - An attempt whose operation ended Failed, or that ended RequestFailed or Rejected, ends as a
 *   failed job whose failedReason is the phase, reason and message; every other end (Succeeded,
 *   Stale, Dropped: nothing went wrong) completes with the outcome as its return value. The job
 *   fails with BullMQ's UnrecoverableError, after its end was reported: the queue never runs it
 *   again, and an attempt job run a second time is refused (`attemptTakenKey`), since every retry
 *   is the branch worker's decision (docs/design/sidecar.md).
 */
import type { Attempt, ReportPhase } from "./contract.js";

/** Phases that end an attempt job as failed. */
export const FAILED_ATTEMPT_PHASES: readonly ReportPhase[] = ["Failed", "RequestFailed", "Rejected"];

/** `<branch key> <applier kind>/<namespace>/<name> <commit, 12 hex>`. */
export function attemptJobName(a: Pick<Attempt, "branchKey" | "applier" | "commit">): string {
  return `${a.branchKey} ${a.applier.kind}/${a.applier.namespace}/${a.applier.name} ${a.commit.slice(0, 12)}`;
}

/** The progress an attempt job shows: the operation's last phase, as reported. */
export interface AttemptProgress {
  phase: ReportPhase;
  at: string;
  commit: string;
  reason?: string;
  message?: string;
  /** The operation went Unresolved: past its deadline, still followed until its end is observed. */
  stuck?: true;
}

export function attemptProgress(
  phase: ReportPhase,
  at: string,
  commit: string,
  extra: { reason?: string; message?: string } = {},
): AttemptProgress {
  return {
    phase,
    at,
    commit,
    ...(extra.reason ? { reason: extra.reason } : {}),
    ...(extra.message ? { message: extra.message } : {}),
    ...(phase === "Unresolved" ? { stuck: true as const } : {}),
  };
}

/** One line of the job's log for a phase. */
export function attemptLogLine(p: AttemptProgress): string {
  const why = [p.reason, p.message].filter(Boolean).join(": ");
  const head = p.stuck ? `STUCK ${p.phase}` : p.phase;
  return `${p.at} ${head}${why ? ` — ${why}` : ""}${p.stuck ? " (past its deadline; still followed until its end is observed)" : ""}`;
}

/**
 * How the job ends once its attempt's last phase is known: failed with this reason, or completed
 * with this value. A job whose operation did not end here (the sidecar stopped; restart recovery
 * follows it from the claim's record) completes saying so: its end is the claim's, not the job's.
 */
export function attemptJobEnd(
  last: AttemptProgress | undefined,
  ended: boolean,
): { failed: string } | { completed: AttemptProgress | { phase: "none"; message: string } } {
  if (!ended) {
    const handed =
      "the sidecar stopped before the operation ended; restart recovery follows it from the claim";
    return { completed: last ? { ...last, message: handed } : { phase: "none", message: handed } };
  }
  if (!last || !FAILED_ATTEMPT_PHASES.includes(last.phase))
    return { completed: last ?? { phase: "none", message: "no phase reported" } };
  return { failed: [last.phase, last.reason, last.message].filter(Boolean).join(": ") };
}
