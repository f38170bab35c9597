/**
 * How long a branch worker sleeps, and which branch workers a replica's inbox check wakes, as pure
 * functions. Every append to an inbox wakes its owner (the `branches` signal, or the replica's own
 * wake for the notices and reports it appends); the inbox check is the safety net for a signal
 * that was lost, asked for all of a replica's branches in one round trip, so an idle branch has no
 * reason to read its inbox by itself and sleeps until a deadline of its own.
 */

/** How often a replica asks Redis which of its branches' inboxes hold unread entries, by default. */
export const DEFAULT_INBOX_CHECK_MS = 1000;

/**
 * Longest sleep of an idle branch worker in a replica (no retry pending, no deadline of its own),
 * by default. The inbox check wakes it for inbox entries, and every other kind of news (a flush,
 * a verdict, a GitTarget change, a notice) wakes it directly, so this bound only caps how long a
 * branch goes without reading its remote when nothing at all happens.
 */
export const DEFAULT_IDLE_POLL_MS = 60_000;

export interface SleepInputs {
  now: number;
  /** Longest sleep while publication retries or intake is paused (the gate may latch the pause). */
  pollMs: number;
  /** Longest sleep otherwise. */
  idlePollMs: number;
  /** When the first open commit window closes, if one is open. */
  windowDeadline: number | undefined;
  pendingWrites: number;
  nextFetchAt: number;
  /** When the pending publication retry is due, if one is. */
  retryAt: number | undefined;
  intakePaused: boolean;
  autoPublish: boolean;
  lastPushAt: number;
  pushCooldownMs: number;
}

/**
 * When the branch worker's next step is due. Only deadlines the next step acts on count: a past
 * one that is not acted on would spin the loop.
 */
export function nextStepAt(s: SleepInputs): number {
  const busy = s.retryAt !== undefined || s.intakePaused;
  const deadlines = [s.now + (busy ? s.pollMs : s.idlePollMs)];
  if (s.windowDeadline !== undefined) deadlines.push(s.windowDeadline);
  if (s.pendingWrites === 0) deadlines.push(Math.max(s.nextFetchAt, s.retryAt ?? 0));
  else if (s.autoPublish) deadlines.push(s.retryAt ?? s.lastPushAt + s.pushCooldownMs);
  return Math.min(...deadlines);
}

/** A branch an inbox check asks about: the last inbox entry id its worker read ("0": none yet). */
export interface ReadMark {
  branchKey: string;
  readTo: string;
}

/**
 * The branches whose inbox holds an entry past their read mark, from the check's answer: the
 * 1-based positions, per batch, of the inboxes that do.
 */
export function branchesWithNews(batches: ReadMark[][], positions: number[][]): string[] {
  const out: string[] = [];
  batches.forEach((batch, b) => {
    for (const p of positions[b] ?? []) {
      const mark = batch[p - 1];
      if (mark) out.push(mark.branchKey);
    }
  });
  return out;
}

/** Splits the read marks into batches of at most `size` (one script call each, one pipeline). */
export function inBatches<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
