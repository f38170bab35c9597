/**
 * The apply window: from the send of an attempt until its operation completed, plus a grace of
 * 10 s for the applier's writes to reach the observer. Edits not in the window's commit are
 * recorded in it; a write of the applier's own managers alone over such an edit, in the edit's second
 * or later, is a late apply: Git keeps the edit and a Repair becomes due. The write and the edit
 * may reach the worker in either order, so each is judged against the other as it arrives.
 */
import { type ObjectRef, WINDOW_GRACE_MS } from "../contract.js";
import type { AppliedWrite, ApplyWindow, GuardedEdit, WatchedVerdict } from "./model.js";

export type { WatchedVerdict };

export { WINDOW_GRACE_MS };

/**
 * How long a closed window is still kept: a watched write that reached the inbox while the window
 * was open but is judged later (read again by the next owner after a handover: the lease runs
 * out, 10 s by default, and the branch starts) is judged as of its arrival, against the window as
 * it was then.
 */
export const WINDOW_KEPT_MS = 60_000;

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

/**
 * The time a write is judged as of: its arrival in the inbox, or `now` when that is later or
 * unknown (an arrival stamped by another clock ahead of this one counts as now).
 */
export function asOfArrival(arrivedAt: number | undefined, now: number): number {
  return arrivedAt !== undefined && Number.isFinite(arrivedAt) ? Math.min(now, arrivedAt) : now;
}

export function windowOpen(w: ApplyWindow, now: number): boolean {
  const closes = windowClosesAt(w);
  return closes === null || now < closes;
}

/** Whether a window is still kept at `now` (open, or closed less than `WINDOW_KEPT_MS` ago). */
export function windowKept(w: ApplyWindow, now: number): boolean {
  const closes = windowClosesAt(w);
  return closes === null || now < closes + WINDOW_KEPT_MS;
}

/**
 * The open windows (oldest first) whose apply a write of the applier's own managers at
 * `writtenAtSec` could be: window i was sent at or before that second, its operation had not
 * completed in an earlier second (its end is when its report reached the worker, after its last
 * write; the window stays open only for the watch to catch up), and the next window was not sent
 * in an earlier second. On a shared second both are suspects.
 */
export function windowsForWrite(
  windows: readonly ApplyWindow[],
  writtenAtSec: number,
  now: number,
): ApplyWindow[] {
  if (!Number.isFinite(writtenAtSec)) return [];
  const open = windows.filter((w) => windowOpen(w, now)).sort((a, b) => a.sentAt - b.sentAt);
  return open.filter((w, i) => {
    const endSec = w.completedAt === null ? Number.POSITIVE_INFINITY : Math.floor(w.completedAt / 1000);
    const next = open[i + 1];
    return (
      Math.floor(w.sentAt / 1000) <= writtenAtSec &&
      writtenAtSec <= endSec &&
      (next === undefined || writtenAtSec <= Math.floor(next.sentAt / 1000))
    );
  });
}

/** Whether an applier write at `writtenAtSec` is over an edit made at `editedAtSec`. */
export function isOver(writtenAtSec: number, editedAtSec: number): boolean {
  // The observer reports a write only when it came after every edit already on the object, so an
  // edit in the write's own second came first (resourceVersion order): the write is over it.
  return editedAtSec <= writtenAtSec;
}

/**
 * Judges a write the applier's own managers made to `object` at `writtenAtSec`, against the
 * windows whose apply it could be: the newest edit of the object recorded there, made in the
 * write's second or before, is the one it overwrote. An edit in a later second proves the write
 * is no late apply. Returns the window and edit collided with, or null.
 */
export function judgeApplierWrite(
  windows: readonly ApplyWindow[],
  object: string,
  writtenAtSec: number,
  now: number,
): { window: ApplyWindow; edit: GuardedEdit } | null {
  let found: { window: ApplyWindow; edit: GuardedEdit } | null = null;
  for (const w of windowsForWrite(windows, writtenAtSec, now)) {
    for (const e of w.edits) {
      if (e.object !== object || !isOver(writtenAtSec, e.editedAtSec)) continue;
      if (found === null || e.editedAtSec > found.edit.editedAtSec) found = { window: w, edit: e };
    }
  }
  return found;
}

/** Remembers a judged applier write in every window whose apply it could be (newest per object). */
export function rememberApplierWrite(
  windows: readonly ApplyWindow[],
  write: AppliedWrite,
  now: number,
): void {
  for (const w of windowsForWrite(windows, write.writtenAtSec, now)) {
    const writes = w.writes ?? [];
    const i = writes.findIndex((x) => x.object === write.object);
    if (i < 0) writes.push(write);
    else if ((writes[i] as AppliedWrite).writtenAtSec < write.writtenAtSec) writes[i] = write;
    w.writes = writes;
  }
}

/**
 * Judges a watched write of the applier's own managers at `writtenAtSec` against its applier's
 * windows, the same judgement a window observer's report gets (`judgeApplierWrite`), and says
 * whether the write is mirrored. Only proof withholds: no window that could be its apply makes it
 * late, an edit recorded in the window newer than the applier's entry makes it an undo, and both
 * are mirrored as edits.
 */
export function judgeWatchedWrite(
  windows: readonly ApplyWindow[],
  object: string,
  writtenAtSec: number,
  now: number,
): { verdict: WatchedVerdict; hit?: { window: ApplyWindow; edit: GuardedEdit } } {
  const candidates = windowsForWrite(windows, writtenAtSec, now);
  if (candidates.length === 0) return { verdict: "late" };
  const newer = candidates.some((w) =>
    w.edits.some((e) => e.object === object && e.editedAtSec > writtenAtSec),
  );
  if (newer) return { verdict: "undo" };
  const hit = judgeApplierWrite(windows, object, writtenAtSec, now);
  return hit ? { verdict: "withheld", hit } : { verdict: "not_mirrored" };
}

/** Whether a verdict sends the write on to a commit window. */
export const mirrorsWrite = (v: WatchedVerdict): boolean => v === "late" || v === "undo";
