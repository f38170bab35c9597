/**
 * Ancestry answered by a Git clone, as the stale-operation rule asks it (`queue/git/ancestry.ts`,
 * shared with the branch worker, which asks the same question of its own clone).
 */
import { cloneAncestry as ofClone } from "../../queue/git/ancestry.js";
import type { Ancestry } from "./stale.js";

export function cloneAncestry(gitdir: string): Ancestry {
  const ask = ofClone(gitdir);
  return (revision, commit) => ask(revision, commit);
}
