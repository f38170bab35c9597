/**
 * What a pending write becomes in a commit: its file changes on a parent (an upsert with a base
 * merged three ways onto the object as Git holds it), its message, author and `Applygate-Write`
 * trailers, and which of its writes cannot be committed alone. Also what a snapshot's prune
 * sweep deletes. Functions of the repository and a pending write; they read Git, never write a
 * ref, and keep nothing but the cache of foreign-commit ranges they are handed.
 */
import { parse as parseYaml } from "yaml";
import type { AcceptedWrite, SnapshotSweep, WriteChange } from "../contract.js";
import { errorMessage } from "../errors.js";
import { cleanObject, objectPath, objectYaml, refOf } from "../git/layout.js";
import type { BareRepo, FileChange } from "../git/repo.js";
import { GitRemoteError, PushRejectedError } from "../git/smart-http.js";
import { type SweptFile, sweepDeletes, sweptDirs } from "../git/sweep.js";
import type { Logger } from "../log.js";
import { isMap, mergedObject } from "../object-merge.js";
import type { ForeignRanges, HeldWrite, PendingWrite } from "./branch-state.js";
import { LostLeaseError } from "./inbox.js";

/** Trailer naming each write a commit carries: how any owner recognises a write already landed. */
export const WRITE_TRAILER = "Applygate-Write";

/** The write ids a commit message's trailers name. */
export function trailersOf(message: string): string[] {
  const out: string[] = [];
  const prefix = `${WRITE_TRAILER}: `;
  for (const line of message.split("\n"))
    if (line.startsWith(prefix)) out.push(line.slice(prefix.length).trim());
  return out;
}

/** The repository a pending write is committed in, and what is known of its history. */
export interface CommitSource {
  repo: BareRepo;
  foreignRanges: ForeignRanges;
  /** Whether a write is still held (a write settled meanwhile is left out of every commit). */
  isHeld(writeId: string): boolean;
}

/** Who commits, and when. */
export interface Committer {
  now(): number;
  identity?: { name: string; email: string } | undefined;
}

export type CommitSpec = ReturnType<typeof commitSpec>;

/** How many commits the walk for foreign commits since an applied commit reads at most. */
const FOREIGN_WALK_BOUND = 1000;

/**
 * Whether retrying cannot make a failed commit succeed: anything but a remote or network failure,
 * a lost lease, or a system error (a full disk heals).
 */
export function cannotHeal(err: unknown): boolean {
  if (err instanceof GitRemoteError || err instanceof PushRejectedError || err instanceof LostLeaseError)
    return false;
  return typeof (err as { syscall?: unknown })?.syscall !== "string";
}

/** The message, author and committer of a pending write's commit (its held writes only). */
export function commitSpec(p: PendingWrite, isHeld: (writeId: string) => boolean, committer: Committer) {
  const writes = p.writes.filter((h) => isHeld(h.write.id));
  const first = (writes[0] ?? p.writes[0]) as HeldWrite;
  const messages = [...new Set(writes.map((h) => h.write.message).filter((m): m is string => !!m))];
  const subject =
    messages.length > 0
      ? messages.join("\n\n")
      : `Update ${p.target} (${writes.length} write${writes.length === 1 ? "" : "s"})`;
  const trailers = writes.map((h) => `${WRITE_TRAILER}: ${h.write.id}`).join("\n");
  const ts = Math.floor(committer.now() / 1000);
  const edited = Date.parse(first.write.editedAt ?? first.write.acceptedAt);
  return {
    message: `${subject}\n\n${trailers}\n`,
    author: { ...first.write.author, timestamp: Number.isNaN(edited) ? ts : Math.floor(edited / 1000) },
    committer: {
      ...(committer.identity ?? { name: "applygate", email: "applygate@localhost" }),
      timestamp: ts,
    },
  };
}

/** The held writes of a pending write whose own changes cannot be committed on `parent`. */
export async function failingAlone(
  c: CommitSource,
  parent: string | undefined,
  p: PendingWrite,
  committer: Committer,
): Promise<HeldWrite[]> {
  const failing: HeldWrite[] = [];
  for (const h of p.writes) {
    if (!c.isHeld(h.write.id)) continue;
    const alone = { ...p, writes: [h] };
    const { changes } = await changesOf(c, parent, alone);
    try {
      await c.repo.commitChanges(parent, changes, commitSpec(alone, c.isHeld, committer));
    } catch (err) {
      if (cannotHeal(err)) failing.push(h);
    }
  }
  return failing;
}

/**
 * The file changes of a pending write's held writes on `parent`, in order. An upsert with a base
 * stores only its change, carried over the object as this commit has it so far (an earlier
 * write's result, else the file at `parent`): a field the writer did not change keeps Git's
 * value. Without a base, or with no object in Git to merge onto, the object is stored whole.
 */
export async function changesOf(
  c: CommitSource,
  parent: string | undefined,
  p: PendingWrite,
): Promise<{
  changes: FileChange[];
  refused: Array<{ held: HeldWrite; reason: string }>;
}> {
  const changes: FileChange[] = [];
  const refused: Array<{ held: HeldWrite; reason: string }> = [];
  const sofar = new Map<string, string | null>();
  const fileAt = async (path: string, mine: FileChange[]): Promise<string | null | undefined> => {
    const own = mine.findLast((f) => f.path === path);
    if (own) return own.content === null ? null : String(own.content);
    if (sofar.has(path)) return sofar.get(path);
    if (!parent) return undefined;
    return (await c.repo.readFile(parent, path))?.toString("utf8");
  };
  for (const h of p.writes) {
    if (!c.isHeld(h.write.id)) continue;
    const mine: FileChange[] = [];
    let problem: string | undefined;
    for (const change of h.write.changes) {
      // The layout's and the serializer's refusals settle the write as refused; a failed read
      // of Git is thrown, for the publication to be tried again.
      const stored = (f: () => FileChange) => {
        try {
          mine.push(f());
        } catch (err) {
          problem ??= errorMessage(err);
        }
      };
      if (change.op === "delete") {
        stored(() => ({ path: objectPath(h.write.path, change.ref), content: null }));
        continue;
      }
      const obj = change.object as unknown as Parameters<typeof refOf>[0] & Record<string, unknown>;
      let path: string;
      try {
        path = objectPath(h.write.path, refOf(obj));
      } catch (err) {
        problem ??= errorMessage(err);
        continue;
      }
      const named = change.base as Record<string, unknown> | undefined;
      const bases = named ? [named] : await snapshotBases(c, h, path);
      const current = bases.length > 0 ? storedObject(await fileAt(path, mine)) : undefined;
      stored(() => ({
        path,
        content: objectYaml(current ? mergedObject(cleanObject(obj), bases.map(cleanObject), current) : obj),
      }));
    }
    if (problem !== undefined) {
      refused.push({ held: h, reason: problem });
      continue;
    }
    changes.push(...mine);
    for (const f of mine) sofar.set(f.path, f.content === null ? null : String(f.content));
  }
  return { changes, refused };
}

/**
 * The bases of a snapshot's object that names none. Its file at the tip the worker held when it
 * read the write: the snapshot saw the cluster as of that tip, so only what differs from it is a
 * change, and an object equal to it changes nothing, whatever Git took meanwhile. And, for each
 * commit the stamp says the cluster may still run (the applier's last applied commit, an
 * operation's commit), its file there when a foreign commit since then changed the file: that
 * push may not be on the cluster yet, so a field still at its value there is the applier's, not
 * an edit. Our own publications since then need no such base: they carry what the cluster
 * already held, so an edit back to an older value is an edit. None for other writes, or when no
 * base holds a file (an object new to Git is written whole); a commit the clone lacks is passed
 * over.
 */
async function snapshotBases(
  c: CommitSource,
  h: HeldWrite,
  path: string,
): Promise<Array<Record<string, unknown>>> {
  const tip = h.tipWhenRead;
  if (!h.write.snapshot || !tip) return [];
  const bases: Array<Record<string, unknown>> = [];
  const tipFile = storedObject((await c.repo.readFile(tip, path))?.toString("utf8"));
  if (tipFile) bases.push(tipFile);
  for (const commit of new Set(h.write.snapshot.appliedCommits ?? [])) {
    if (commit === tip || !(await c.repo.hasObject(commit))) continue;
    if (!(await foreignChangeSince(c, commit, tip, path))) continue;
    const base = storedObject((await c.repo.readFile(commit, path))?.toString("utf8"));
    if (base) bases.push(base);
  }
  return bases;
}

/**
 * Did a foreign commit (one carrying no write of ours) between `from` and `to` change `path`?
 * The commits are walked back from `to` and kept per pair (commits never change); a history
 * that does not reach `from` within the bound counts as a change (the safe side: the older file
 * is a base too).
 */
async function foreignChangeSince(c: CommitSource, from: string, to: string, path: string): Promise<boolean> {
  const foreign = await foreignCommits(c, from, to);
  if (foreign === null) return true;
  for (const { oid, parent } of foreign) {
    const now = await c.repo.readFile(oid, path);
    const before = parent ? await c.repo.readFile(parent, path) : undefined;
    if (now === undefined ? before !== undefined : before === undefined || !now.equals(before)) return true;
  }
  return false;
}

async function foreignCommits(
  c: CommitSource,
  from: string,
  to: string,
): Promise<Array<{ oid: string; parent?: string }> | null> {
  const key = `${from}..${to}`;
  const known = c.foreignRanges.get(key);
  if (known !== undefined) return known;
  const foreign: Array<{ oid: string; parent?: string }> = [];
  const seen = new Set<string>();
  const queue = [to];
  let reached = false;
  while (queue.length > 0 && seen.size < FOREIGN_WALK_BOUND) {
    const oid = queue.shift() as string;
    if (seen.has(oid)) continue;
    if (oid === from) {
      reached = true;
      continue;
    }
    seen.add(oid);
    let commit: Awaited<ReturnType<BareRepo["readCommit"]>>;
    try {
      commit = await c.repo.readCommit(oid);
    } catch {
      break; // a commit the clone lacks: the range is not known
    }
    if (trailersOf(commit.message).length === 0)
      foreign.push({ oid, ...(commit.parents[0] ? { parent: commit.parents[0] } : {}) });
    queue.push(...commit.parents);
  }
  const out = reached && queue.length === 0 ? foreign : null;
  if (c.foreignRanges.size >= 64) c.foreignRanges.clear();
  c.foreignRanges.set(key, out);
  return out;
}

/**
 * The delete changes of a snapshot's prune sweep on the remote tip: files of objects gone live
 * the rule selects.
 */
export async function sweepChanges(
  repo: BareRepo,
  tip: string | undefined,
  write: AcceptedWrite,
  log: Logger,
): Promise<WriteChange[]> {
  const sweep = write.sweep as SnapshotSweep;
  if (!tip) return [];
  // Only a file Git held at the commit last applied is swept: one added since (a foreign push,
  // a publication not applied yet) was never live, and deleting it would lose its object.
  const applied = sweep.appliedCommit;
  if (!applied || !(await repo.hasObject(applied))) {
    log.debug(
      { write: write.id, kind: sweep.kind, commit: applied },
      "snapshot sweep: the applied commit is unknown or not in the clone; nothing deleted",
    );
    return [];
  }
  const changes: WriteChange[] = [];
  for (const { dir, namespace } of sweptDirs(write.path, sweep)) {
    const wasApplied = new Set(await repo.listFiles(applied, dir));
    const files: SweptFile[] = [];
    for (const name of await repo.listFiles(tip, dir)) {
      if (!wasApplied.has(name)) continue;
      const content = await repo.readFile(tip, `${dir}/${name}`);
      if (content) files.push({ name, content: content.toString("utf8") });
    }
    for (const ref of sweepDeletes(sweep, namespace, files)) changes.push({ op: "delete", ref });
  }
  if (changes.length > 0)
    log.info(
      { write: write.id, kind: sweep.kind, deletes: changes.length },
      "snapshot sweep: files of objects gone live to delete",
    );
  return changes.slice(0, 1000);
}

/** The object a file of the folder holds, as the merge reads it; undefined when it holds no object. */
function storedObject(text: string | null | undefined): Record<string, unknown> | undefined {
  if (!text) return undefined;
  try {
    const parsed: unknown = parseYaml(text);
    return isMap(parsed) ? parsed : undefined;
  } catch {
    return undefined; // not YAML (a person pushed something else): the object is stored whole
  }
}
