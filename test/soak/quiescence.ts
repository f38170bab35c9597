/**
 * When a soak run is quiet enough to judge: pure, over the looks the run takes at the assembly
 * (every 200 ms) and at the record it then reads, so a recorded timeline can be replayed here.
 *
 * Quiet means: every accepted write published (or refused), no apply due and not sent, every
 * attempt seen sent has ended, nothing on its way from the queues unread, the cluster holds Git's
 * value, and nothing (tip,
 * attempts, reports) moved for `quietMs`. The record is read after that, which takes a while (the
 * branch's history, the values): it is judged only if nothing moved meanwhile either — otherwise
 * an attempt sent just after the wait ended would be in the record without its end (seed 8023).
 */

/** One look at the assembly. */
export interface Look {
  at: number;
  /** Accepted writes whose publication is not recorded yet. */
  unpublished: number;
  /** Tokens of the attempts seen sent, in order. */
  sent: readonly string[];
  /** Tokens with a terminal phase reported. */
  ended: readonly string[];
  /** Jobs the queues announced that are not read yet (an attempt or a report on its way). */
  unread: number;
  /**
   * The appliers with an apply due and not sent yet, as the branch's decision state holds it
   * (pending reasons): a flush backed off by a Git outage sends it seconds after the publication.
   */
  due: readonly string[];
  /** What differs between the cluster and Git ("flux", "argocd", "webhook"). */
  differ: readonly string[];
  /** The branch's tip. */
  tip: string;
  /** Progress events seen so far (notices, attempts, reports). */
  events: number;
}

/** Since when the looks have seen the same state. */
export interface Stillness {
  since: number;
  state: string;
}

/** The attempts seen sent whose operation has not ended. */
export function openAttempts(l: Look): string[] {
  const ended = new Set(l.ended);
  return l.sent.filter((t) => !ended.has(t));
}

function stateOf(l: Look): string {
  return JSON.stringify([l.tip, l.events, l.unread, l.due, openAttempts(l), l.differ, l.unpublished]);
}

/** The next stillness after a look, and whether the run is quiet at it. */
export function judgeLook(
  prev: Stillness | undefined,
  l: Look,
  quietMs: number,
): { still: Stillness; quiet: boolean } {
  const state = stateOf(l);
  const still = prev && prev.state === state ? prev : { since: l.at, state };
  const quiet =
    l.unpublished === 0 &&
    l.unread === 0 &&
    l.due.length === 0 &&
    openAttempts(l).length === 0 &&
    l.differ.length === 0 &&
    l.at - still.since >= quietMs;
  return { still, quiet };
}

/**
 * Whether the record read after the quiet look `at` may be judged: the look taken once it was read
 * saw the same state (no attempt sent, no report, no tip moved meanwhile) and is quiet itself.
 */
export function recordHolds(at: Look, after: Look): boolean {
  return (
    stateOf(at) === stateOf(after) &&
    after.unpublished === 0 &&
    after.unread === 0 &&
    after.due.length === 0 &&
    openAttempts(after).length === 0 &&
    after.differ.length === 0
  );
}

/** What kept a run from quiescence, for the violation that says so. */
export function whyNotQuiet(l: Look): string {
  const open = openAttempts(l);
  const parts = [
    ...(l.unpublished ? [`${l.unpublished} accepted write(s) not published`] : []),
    ...(open.length ? [`attempt(s) sent and not ended: ${open.join(", ")}`] : []),
    ...(l.unread ? [`${l.unread} queue job(s) announced and not read`] : []),
    ...(l.due.length ? [`an apply due and not sent for ${l.due.join(", ")}`] : []),
    ...(l.differ.length ? [`the cluster differs from Git for ${l.differ.join(", ")}`] : []),
  ];
  return parts.length ? parts.join("; ") : "something kept moving";
}

export interface QuietWait {
  /** Takes one look at the assembly (a throw counts as not quiet: what it reads may be restarting). */
  look: () => Promise<Look>;
  /** Reads the record to judge (the branch's commits, the final values); runs after each quiet look. */
  readRecord: () => Promise<void>;
  /** Resolves once every job the queues announced so far is read. */
  drained: () => Promise<void>;
  quietMs: number;
  timeoutMs: number;
  everyMs: number;
  now: () => number;
  sleep: (ms: number) => Promise<void>;
  /** Told when something moved while the record was read (the wait goes on). */
  onMoved?: (quietAt: Look, after: Look) => void;
}

export type QuietEnd =
  /** Quiet, and still so once the record was read: `look` is the state the record holds. */
  | { quiet: true; look: Look }
  /** Not quiet within the wait: `look` is the last one taken. */
  | { quiet: false; look: Look | undefined };

/**
 * Looks every `everyMs` until quiet, reads the record, and looks again once it is read: only a
 * record read while nothing moved is judged; otherwise the wait goes on (a fresh stillness), up
 * to `timeoutMs` in all.
 */
export async function waitQuiet(w: QuietWait): Promise<QuietEnd> {
  const deadline = w.now() + w.timeoutMs;
  let still: Stillness | undefined;
  let last: Look | undefined;
  for (;;) {
    let quietAt: Look | undefined;
    try {
      const l = await w.look();
      last = l;
      const j = judgeLook(still, l, w.quietMs);
      still = j.still;
      if (j.quiet) quietAt = l;
    } catch {
      still = undefined;
    }
    if (quietAt) {
      await w.readRecord();
      await w.drained();
      try {
        const after = await w.look();
        last = after;
        if (recordHolds(quietAt, after)) return { quiet: true, look: after };
        w.onMoved?.(quietAt, after);
      } catch {
        // Looked at while something restarted: not quiet.
      }
      still = undefined;
    }
    if (w.now() > deadline) return { quiet: false, look: last };
    await w.sleep(w.everyMs);
  }
}
