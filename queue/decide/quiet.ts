/**
 * Whether a branch's decisions are at rest: no apply attempt out, no apply window open, no flush
 * under way and no decided write waiting for its publication. Only such a branch is handed to
 * another worker replica by balancing (docs/design/balancing.md): a move then costs its new owner
 * a restore and nothing in flight changes hands. A reason pending but not due (a change window,
 * a backoff) does not count: it may wait for hours, and the new owner restores it as it is.
 */
import type { DecisionState } from "./model.js";
import { windowOpen } from "./window.js";

export function decisionsQuiet(s: DecisionState, now: number): boolean {
  if (s.flush !== null || s.unpublished.length > 0) return false;
  for (const a of Object.values(s.appliers)) {
    if (a.operation !== null) return false;
    if (a.windows.some((w) => windowOpen(w, now))) return false;
  }
  return true;
}
