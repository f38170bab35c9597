/**
 * Refusals: at most one request a minute per GitTarget; a refusal inside that minute is carried
 * by one trailing request at the minute's end.
 */
import type { TargetState } from "./model.js";

export const REFUSAL_INTERVAL_MS = 60_000;

/**
 * A refusal counts only for a target that consents (`onRefusal: Reapply`). A suspended target
 * still consents: its refusal stays pending and is decided when it resumes (`notDueBecause`).
 */
export function consentsToRefusal(t: TargetState | undefined): boolean {
  return t !== undefined && t.onRefusal === "Reapply" && t.claim !== null;
}

/**
 * Admits a refusal at `now`: true when a Refusal becomes pending at once; otherwise a trailing
 * request is set (or already set) on the target. Mutates the target.
 */
export function admitRefusal(t: TargetState, now: number): boolean {
  if (t.lastRefusalAt === null || now - t.lastRefusalAt >= REFUSAL_INTERVAL_MS) {
    t.lastRefusalAt = now;
    t.trailingRefusalAt = null;
    return true;
  }
  t.trailingRefusalAt ??= t.lastRefusalAt + REFUSAL_INTERVAL_MS;
  return false;
}

/** Fires a trailing request whose time has come. Mutates the target. */
export function trailingRefusalDue(t: TargetState, now: number): boolean {
  if (t.trailingRefusalAt === null || now < t.trailingRefusalAt) return false;
  t.lastRefusalAt = now;
  t.trailingRefusalAt = null;
  return true;
}
