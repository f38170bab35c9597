/**
 * The foreign commits an apply of the tip would bring since the commit an applier last applied:
 * the first-parent line from the tip back to that commit, leaving out the worker's own
 * publications (each the commits after its base up to its tip). A merge counts as one commit:
 * approving it approves what it brings. Without a last applied commit only the newest foreign
 * commit is asked for. The walk stops after `limit` commits; what it found then is what counts.
 * `line`, when given, receives every commit the walk passes, newest first, the worker's own
 * publication tips included (what a tag mode reads tags on).
 */
import type { ForeignRead } from "../decide/index.js";

export const APPROVAL_WALK_LIMIT = 1000;

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
  let c: string | null = tip;
  for (let steps = 0; c !== null && c !== since && steps < limit; steps++) {
    line?.push(c);
    const ownBase = bases.get(c);
    if (ownBase !== undefined) {
      c = ownBase;
      continue;
    }
    commits.push(c);
    if (since === null) break;
    c = (await parentsOf(c))[0] ?? null;
  }
  return { tip, since, commits };
}
