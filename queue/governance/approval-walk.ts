/**
 * The foreign commits an apply of the tip would bring since the commit an applier last applied:
 * the first-parent line from the tip back to that commit, leaving out the worker's own
 * publications (each the commits after its base up to its tip). A merge counts as one commit:
 * approving it approves what it brings. Without a last applied commit only the newest foreign
 * commit is asked for. The walk stops after `limit` commits; what it found then is what counts.
 * `line`, when given, receives every commit the walk passes, newest first, the worker's own
 * publication tips included (what a tag mode reads tags on).
 *
 * A tip that does not descend from the last applied commit (a force-push back to an older commit,
 * a rewritten history) is no list of commits to approve: its old commits may each have been
 * approved once (signed, say), and a walk of them would approve the return. The read then names
 * only the newest foreign commit (`notDescendant`), which an Approval must name. Descent is looked
 * for along every parent, not only the first (the last applied commit may sit on a merged branch),
 * over at most `ANCESTRY_LIMIT` commits; a history that large is taken as not descending (an
 * Approval lets it through).
 */
import type { ForeignRead } from "./model.js";

export const APPROVAL_WALK_LIMIT = 1000;
export const ANCESTRY_LIMIT = 100_000;

export async function readForeign(
  parentsOf: (oid: string) => Promise<string[]>,
  tip: string,
  since: string | null,
  own: readonly { tip: string; base: string | null }[],
  limit = APPROVAL_WALK_LIMIT,
  line?: string[],
): Promise<ForeignRead> {
  const bases = new Map(own.map((p) => [p.tip, p.base]));
  const commits: string[] = [];
  const passed: string[] = [];
  let c: string | null = tip;
  for (let steps = 0; c !== null && c !== since && steps < limit; steps++) {
    passed.push(c);
    const ownBase = bases.get(c);
    if (ownBase !== undefined) {
      c = ownBase;
      continue;
    }
    commits.push(c);
    if (since === null) break;
    c = (await parentsOf(c))[0] ?? null;
  }
  if (since !== null && c !== since && !(await descends(parentsOf, tip, since))) {
    const newest = commits[0] ?? tip;
    line?.push(...passed.slice(0, passed.indexOf(newest) + 1));
    return { tip, since, commits: [newest], notDescendant: true };
  }
  line?.push(...passed);
  return { tip, since, commits };
}

/**
 * Whether `ancestor` is reachable from `tip` along any parents, looking at `limit` commits at most
 * (then: not known to descend).
 */
export async function descends(
  parentsOf: (oid: string) => Promise<string[]>,
  tip: string,
  ancestor: string,
  limit = ANCESTRY_LIMIT,
): Promise<boolean> {
  const seen = new Set<string>([tip]);
  const queue = [tip];
  for (let i = 0; i < queue.length && i < limit; i++) {
    const c = queue[i] as string;
    if (c === ancestor) return true;
    for (const p of await parentsOf(c)) {
      if (seen.has(p)) continue;
      seen.add(p);
      queue.push(p);
    }
  }
  return false;
}
