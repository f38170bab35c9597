/**
 * The branch's history as the decisions read it: a commit's parents, ancestry, raw commit and tag
 * objects, the tags on a set of commits, and which GitTargets' folders a tip holds. Every read is
 * of immutable objects already in the clone (tags are downloaded when asked), so the decision
 * driver calls them beside the branch worker's loop.
 */

import type { TargetSpec } from "../directory.js";
import { errorMessage } from "../errors.js";
import { type AncestryOf, cloneAncestry } from "../git/ancestry.js";
import type { BareRepo, RemoteTag } from "../git/repo.js";
import type { Remote } from "../git/smart-http.js";
import type { Logger } from "../log.js";
import type { FolderFacts, FolderRead, TargetName } from "./branch-state.js";

export interface BranchHistory {
  /** The parents of a commit the clone holds: for the approval walk. */
  parentsOf(oid: string): Promise<string[]>;
  /** Whether `revision` is a proper ancestor of `commit`: the proof that a newer tip supersedes. */
  ancestry(revision: string, commit: string): ReturnType<AncestryOf>;
  /** A commit object's bytes, for the signature check. */
  rawCommitOf(oid: string): Promise<Uint8Array>;
  /**
   * The tags of the repository pointing at one of `commits` (one read of `refs/tags/`), with the
   * tag objects of the annotated ones downloaded when the clone lacks them: for the signature
   * check in a tag mode. Only then are tags read; the clone keeps no tag refs.
   */
  tagsAt(commits: readonly string[], keep?: (name: string) => boolean): Promise<RemoteTag[]>;
  /** A tag object's bytes. */
  rawTagOf(oid: string): Promise<Uint8Array>;
  /**
   * Which GitTargets have their folder in the tree of the tip the worker last observed or
   * published: the proof the barrier asks for. Undefined while the branch does not exist.
   */
  folders(): Promise<FolderFacts | undefined>;
}

/** The history reads of one branch's clone; `remote` is the GitProvider's remote as it is now. */
export function branchHistory(
  repo: BareRepo,
  remote: () => Remote,
  folders: () => Promise<FolderFacts | undefined>,
): BranchHistory {
  let ancestryOf: AncestryOf | undefined;
  return {
    async parentsOf(oid) {
      return (await repo.readCommit(oid)).parents;
    },
    ancestry(revision, commit) {
      ancestryOf ??= cloneAncestry(repo.gitdir, repo.cache);
      return ancestryOf(revision, commit);
    },
    rawCommitOf: (oid) => repo.readRawCommit(oid),
    async tagsAt(commits, keep = () => true) {
      const on = new Set(commits);
      const tags = (await repo.remoteTags(remote())).filter((t) => on.has(t.commit) && keep(t.name));
      const objects = tags.filter((t) => t.annotated).map((t) => t.object);
      await repo.fetchObjects(remote(), objects, commits.slice(0, 1));
      return tags;
    },
    rawTagOf: (oid) => repo.readRawTag(oid),
    folders,
  };
}

/**
 * Which of `targets` have their folder in the tree of `tip`, read again only when the tip or the
 * GitTargets' folders changed since `cache.read`.
 */
export async function foldersAt(
  repo: BareRepo,
  cache: { folderRead: FolderRead | undefined },
  tip: string | undefined,
  targets: readonly TargetSpec[],
  log: Logger,
): Promise<TargetName[]> {
  if (!tip) return [];
  const key = JSON.stringify([tip, targets.map((t) => [t.namespace, t.name, t.uid, t.path])]);
  if (cache.folderRead?.key === key) return cache.folderRead.present;
  let has: boolean[] = [];
  try {
    has = await repo.hasFolders(
      tip,
      targets.map((t) => t.path),
    );
  } catch (err) {
    // Unreadable is not proven: the barrier holds, as for a folder that is not there.
    log.warn({ err: errorMessage(err), commit: tip }, "could not read the tip's tree");
  }
  const present = targets
    .filter((_, i) => has[i] === true)
    .map((t) => ({ namespace: t.namespace, name: t.name, ...(t.uid ? { uid: t.uid } : {}) }));
  cache.folderRead = { key, present };
  return present;
}
