/**
 * What a claim waits for before its next attempt (pure): the branch worker's backoff after an
 * attempt that did not succeed, or the applier's own retry inside an operation (Argo CD's sync
 * retry). Shown on the claim as its Retrying condition, so a user sees which commit is tried
 * again, which attempt that is and when it comes, instead of a claim that says nothing for minutes.
 */
import { BACKOFF_BASE_MS, BACKOFF_MAX_MS } from "./backoff.js";
import type { ApplierState, DecisionState, RetryView } from "./model.js";
import { hasPending } from "./reasons.js";

export function retryView(s: DecisionState, a: ApplierState, now: number): RetryView | null {
  const op = a.operation;
  if (op) {
    if (!op.retry || op.retry.at <= now) return null;
    return {
      by: "applier",
      commit: op.commit,
      attempt: op.retry.attempt,
      ...(op.retry.of ? { of: op.retry.of } : {}),
      at: op.retry.at,
      ...(op.message ? { after: { phase: "Running", commit: op.commit, message: op.message } } : {}),
    };
  }
  if (s.tip === null || a.failures === 0 || a.notBefore <= now || !hasPending(a.pending)) return null;
  return {
    by: "worker",
    commit: s.tip,
    attempt: a.failures + 1,
    at: a.notBefore,
    ...(a.lastEnd ? { after: a.lastEnd } : {}),
  };
}

/** A condition message is kept short; the API server allows 32 KiB. */
const MAX_MESSAGE = 2048;
const short = (sha: string) => sha.slice(0, 7);
/** "40 s", "2 min 5 s": whole seconds, rounded up (a retry in 0.2 s is "in 1 s", not "in 0 s"). */
export function inWords(ms: number): string {
  const s = Math.max(0, Math.ceil(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  return s % 60 === 0 ? `${m} min` : `${m} min ${s % 60} s`;
}
const clock = (at: number) => new Date(at).toISOString().replace(/\.\d{3}Z$/, "Z");

/** The condition's message: "retrying 3d4ae03 in 40 s (at …), attempt 3 …, after …". */
export function retryMessage(v: RetryView, now: number): string {
  const when = `in ${inWords(v.at - now)} (at ${clock(v.at)})`;
  const of =
    v.by === "applier"
      ? v.of
        ? ` of ${v.of} (Argo CD's sync retry)`
        : " (Argo CD's sync retry, no limit)"
      : ` (no limit: the wait doubles from ${BACKOFF_BASE_MS / 1000} s to ${BACKOFF_MAX_MS / 60_000} min, and a new commit pushed to the branch is tried at once)`;
  const who = v.by === "applier" ? "Argo CD retries" : "retrying";
  const last = v.after
    ? v.by === "applier"
      ? `; the last attempt said: ${v.after.message ?? ""}`
      : `; the last attempt ended ${v.after.phase}${v.after.reason ? ` (${v.after.reason})` : ""}${v.after.message ? `: ${v.after.message}` : ""}`
    : "";
  return `${who} ${short(v.commit)} ${when}, attempt ${v.attempt}${of}${last}`.slice(0, MAX_MESSAGE);
}
