/**
 * Ancestry answered by a Git clone (the branch worker's bare clone, or any clone of the
 * repository): is `revision` a proper ancestor of `commit`? A revision that does not resolve to
 * exactly one commit the clone holds, or a commit it lacks, is "unknown": never proof. The same
 * commit is "not-ancestor" (nothing supersedes itself).
 */
import * as fs from "node:fs";
import git from "isomorphic-git";
import type { Ancestry } from "../contract.js";

export type AncestryOf = (revision: string, commit: string) => Promise<Ancestry>;

/** `cache`: isomorphic-git's cache of pack indexes, shared with the clone's other reads when given. */
export function cloneAncestry(gitdir: string, cache: object = {}): AncestryOf {
  const resolve = async (rev: string): Promise<string | undefined> => {
    try {
      const oid = rev.length === 40 ? rev : await git.expandOid({ fs, gitdir, oid: rev, cache });
      await git.readCommit({ fs, gitdir, oid, cache });
      return oid;
    } catch {
      return undefined;
    }
  };
  return async (revision, commit): Promise<Ancestry> => {
    const ancestor = await resolve(revision.toLowerCase());
    const descendant = await resolve(commit.toLowerCase());
    if (!ancestor || !descendant) return "unknown";
    if (ancestor === descendant) return "not-ancestor";
    try {
      const yes = await git.isDescendent({ fs, gitdir, oid: descendant, ancestor, depth: -1, cache });
      return yes ? "ancestor" : "not-ancestor";
    } catch {
      return "unknown";
    }
  };
}
