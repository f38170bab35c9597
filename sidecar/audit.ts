/**
 * The audit of applies (pure): what an operation records of the governance that let it through
 * (the approvals, a change-window override), and the bounded `status.history` of ended
 * operations on the claim, newest first, written with the completion itself.
 */
import type { Attempt } from "../queue/contract.js";
import { HISTORY_LIMIT, type HistoryEntry, type Operation } from "../queue/crds/index.js";

/** The governance fields an attempt brings to the operation it records. */
export function attemptAudit(attempt: Attempt): Pick<Operation, "approvals" | "override"> {
  return {
    ...(attempt.approvals ? { approvals: attempt.approvals } : {}),
    ...(attempt.override ? { override: attempt.override } : {}),
  };
}

/** Who or what started an operation, in words. */
export function startedBy(op: Operation): string {
  if (op.token.startsWith("external-")) return "an external resume of the applier (suspended again)";
  if (op.override)
    return `the branch worker, on the change-window override set by ${op.override.by ?? "an unknown manager"}`;
  return "the branch worker";
}

/** The history entry of an ended operation. */
export function historyEntry(op: Operation): HistoryEntry {
  return {
    token: op.token,
    commit: op.commit,
    reasons: [...new Set(op.targets.map((t) => t.reason))],
    startedBy: startedBy(op),
    ...(op.approvals ? { approvals: op.approvals } : {}),
    ...(op.override ? { override: op.override } : {}),
    requestedAt: op.requestedAt,
    ...(op.startedAt ? { startedAt: op.startedAt } : {}),
    ...(op.completedAt ? { completedAt: op.completedAt } : {}),
    phase: op.phase,
    ...(op.outcome ? { outcome: op.outcome } : {}),
    ...(op.message ? { message: op.message.slice(0, 4096) } : {}),
  };
}

/** `entry` in front of `previous` (replacing one with its token), at most `limit` kept. */
export function withHistory(
  previous: readonly HistoryEntry[] | undefined,
  entry: HistoryEntry,
  limit = HISTORY_LIMIT,
): HistoryEntry[] {
  return [entry, ...(previous ?? []).filter((e) => e.token !== entry.token)].slice(0, limit);
}
