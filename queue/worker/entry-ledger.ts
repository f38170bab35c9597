/**
 * The inbox-entry ledger: how an entry the branch worker read leaves the inbox. An entry is
 * settled with the next settle (a notice handed on, a write refused or discarded), or, handed to
 * hooks that save what they are given (`savesEntries`), only once they say it is saved, so an
 * owner that stops before the save leaves the entry to the next owner.
 */
import type { EntryLedger } from "./branch-state.js";
import type { Inbox, SettledEntry } from "./inbox.js";

/** The entry leaves the inbox with the next settle, giving its charge back. */
export function leave(l: EntryLedger, entry: SettledEntry): void {
  l.doneEntries.push(entry);
}

/** A write settled as refused: recorded with the next settle, its entry leaving with it. */
export function refusedWrite(l: EntryLedger, entry: SettledEntry, id: string, reason: string): void {
  l.doneEntries.push(entry);
  l.refusedWrites.push({ id, reason });
}

/**
 * An entry handed to a hook: it waits for `saved` when the hooks save entries (`saves`), else it
 * leaves with the next settle.
 */
export function handOn(l: EntryLedger, entry: SettledEntry, handed: boolean, saves: boolean): void {
  if (handed && saves) l.awaitingSave.set(entry.entryId, entry.charge);
  else l.doneEntries.push(entry);
}

/** The hooks saved their state after an entry (kept until the next step takes it). */
export function saved(l: EntryLedger, entryId: string): void {
  l.savedEntries.push(entryId);
}

/** Entries handed on whose state was saved since the last step leave with the next settle. */
export function settleSaved(l: EntryLedger): void {
  for (const entryId of l.savedEntries.splice(0)) {
    const charge = l.awaitingSave.get(entryId);
    if (charge === undefined) continue;
    l.awaitingSave.delete(entryId);
    l.doneEntries.push({ entryId, charge });
  }
}

/** Takes everything waiting for the next settle, for a settle that carries more (a publication). */
export function takeSettled(l: EntryLedger): {
  entries: SettledEntry[];
  refused: Array<{ id: string; reason: string }>;
} {
  return { entries: l.doneEntries.splice(0), refused: l.refusedWrites.splice(0) };
}

/** Removes the settled entries from the inbox (fenced by the lease's `token`). */
export async function settle(l: EntryLedger, inbox: Inbox, token: () => string): Promise<void> {
  if (l.doneEntries.length === 0 && l.refusedWrites.length === 0) return;
  const fence = token(); // a lost lease keeps the entries
  const { entries, refused } = takeSettled(l);
  await inbox.settle(fence, [], entries, refused);
}
