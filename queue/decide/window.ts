/**
 * The apply window: from the send of an attempt until its operation completed, plus a grace of
 * 10 s for the applier's writes to reach the observer. Edits not in the window's commit are
 * recorded in it; a write of the applier's own managers alone over such an edit, in the edit's second
 * or later, is a late apply: Git keeps the edit and a Repair becomes due.
 */
import type { ObjectRef } from "../contract.js";
import type { ApplyWindow, GuardedEdit } from "./model.js";

export const WINDOW_GRACE_MS = 10_000;

export function objectKey(ref: ObjectRef): string {
  return `${ref.apiVersion}/${ref.kind}/${ref.namespace ?? ""}/${ref.name}`;
}

/** Whole seconds of an RFC 3339 time (managedFields resolve to the second); NaN if unreadable. */
export function toSeconds(rfc3339: string): number {
  return Math.floor(Date.parse(rfc3339) / 1000);
}

export function windowClosesAt(w: ApplyWindow): number | null {
  return w.completedAt === null ? null : w.completedAt + WINDOW_GRACE_MS;
}

export function windowOpen(w: ApplyWindow, now: number): boolean {
  const closes = windowClosesAt(w);
  return closes === null || now < closes;
}

/**
 * Judges a write the applier's own managers made to `object` at `writtenAtSec`, against its open
 * windows (oldest first). The write may be the apply of window i when window i was sent at or
 * before that second, its operation had not completed in an earlier second, and the next window
 * was not sent in an earlier second; on a shared second
 * both applies are suspects, so the edit is protected. Within those windows, the newest edit of
 * the object made in the write's second or before is the one it overwrote. The observer reports a
 * write only when the applier's managers alone hold the newest second, so an edit in that same
 * second came first in resourceVersion order (the edit's own entry would otherwise tie with it):
 * the write is over it. An edit in a later second proves the write is no late apply.
 * Returns the window and edit collided with, or null.
 */
export function judgeApplierWrite(
  windows: readonly ApplyWindow[],
  object: string,
  writtenAtSec: number,
  now: number,
): { window: ApplyWindow; edit: GuardedEdit } | null {
  if (!Number.isFinite(writtenAtSec)) return null;
  const open = windows.filter((w) => windowOpen(w, now)).sort((a, b) => a.sentAt - b.sentAt);
  let found: { window: ApplyWindow; edit: GuardedEdit } | null = null;
  open.forEach((w, i) => {
    const sentSec = Math.floor(w.sentAt / 1000);
    // The operation's end is when its report reached the worker, after its last write: a write in
    // a later second is not this apply (the window stays open only for the watch to catch up).
    const endSec = w.completedAt === null ? Number.POSITIVE_INFINITY : Math.floor(w.completedAt / 1000);
    const next = open[i + 1];
    const couldBeThisApply =
      sentSec <= writtenAtSec &&
      writtenAtSec <= endSec &&
      (next === undefined || writtenAtSec <= Math.floor(next.sentAt / 1000));
    if (!couldBeThisApply) return;
    for (const e of w.edits) {
      if (e.object !== object || e.editedAtSec > writtenAtSec) continue;
      if (found === null || e.editedAtSec > found.edit.editedAtSec) found = { window: w, edit: e };
    }
  });
  return found;
}
