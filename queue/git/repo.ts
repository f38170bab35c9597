/**
 * The worker's persistent bare clone of one repository: no worktree and no index. Commits are
 * written as trees (blobs, the trees along each changed path, the commit), so a commit costs in
 * proportion to the change; each commit remembers the objects it added, so a push sends a pack
 * of just those.
 */
import { createHash, randomBytes } from "node:crypto";
import * as nodeFs from "node:fs";
import { mkdir, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import git from "isomorphic-git";
import { RefReads } from "./ref-reads.js";
import { type Remote, receivePack, uploadPack, ZERO_OID } from "./smart-http.js";

export interface FileChange {
  /** Path from the repository root, `/`-separated. */
  path: string;
  /** New content, or null to remove the file. */
  content: string | Buffer | null;
}

export interface Signature {
  name: string;
  email: string;
  /** Seconds since the epoch. */
  timestamp: number;
}

export interface CommitSpec {
  message: string;
  author: Signature;
  committer?: Signature;
}

export interface WrittenCommit {
  commit: string;
  tree: string;
  /** Every object this commit added (blobs, trees, the commit): what a push must carry. */
  newOids: string[];
}

/** The file operations isomorphic-git uses (node's `fs.promises` shape). */
export type GitFsPromises = Pick<
  typeof nodeFs.promises,
  | "readFile"
  | "writeFile"
  | "unlink"
  | "readdir"
  | "mkdir"
  | "rmdir"
  | "stat"
  | "lstat"
  | "readlink"
  | "symlink"
  | "chmod"
>;

/** What a `readFile()` without a path answers: a promise, so the caller knows reads return promises. */
const PROMISES_YES: Promise<undefined> = Promise.resolve(undefined);

/**
 * The clone's file system: every file is written whole or not at all (into a temporary name
 * beside it, then renamed). isomorphic-git writes an object straight to its final name and never
 * writes over an existing one, so a process killed mid-write left a truncated object that every
 * later commit of the same content trusted, and publication failed from then on ("Invalid
 * compressed buffer") until somebody deleted the clone.
 */
export function wholeWritesFs(base: GitFsPromises = nodeFs.promises): { promises: GitFsPromises } {
  const promises: GitFsPromises = {
    // isomorphic-git wraps the file system anew at every call and, to learn whether it returns
    // promises, calls `readFile()` without a path, twice: node answers with a TypeError whose stack
    // capture was a tenth of a tip read's cost. A read without a path is only ever that question.
    readFile: ((path: Parameters<GitFsPromises["readFile"]>[0] | undefined, options?: never) =>
      path === undefined ? PROMISES_YES : base.readFile(path, options)) as GitFsPromises["readFile"],
    unlink: base.unlink,
    readdir: base.readdir,
    mkdir: base.mkdir,
    rmdir: base.rmdir,
    stat: base.stat,
    lstat: base.lstat,
    readlink: base.readlink,
    symlink: base.symlink,
    chmod: base.chmod,
    writeFile: (async (path: string, data: never, options?: never) => {
      const tmp = `${path}.tmp-${process.pid}-${randomBytes(4).toString("hex")}`;
      await base.writeFile(tmp, data, options);
      await rename(tmp, path);
    }) as GitFsPromises["writeFile"],
  };
  return { promises };
}

/** Commits a download names as held, at most. */
const HAVES_MAX = 32;

interface TreeEntry {
  mode: string;
  path: string;
  oid: string;
  type: "blob" | "tree" | "commit";
}

/** A tag the server advertises. */
export interface RemoteTag {
  name: string;
  object: string;
  commit: string;
  annotated: boolean;
}

export class BareRepo {
  /** isomorphic-git's cache of pack indexes: shared by every call on this clone. */
  readonly cache: object = {};
  /** Trees are immutable by id, so parsed ones are kept (bounded, oldest dropped). */
  private readonly trees = new Map<string, TreeEntry[]>();
  /** Downloads under way by the tip they fetch: branches at one tip share one download. */
  private readonly downloads = new Map<string, Promise<void>>();
  /** Reads of branch tips and tags, shared by every branch of this repository read at one time. */
  readonly refReads = new RefReads();

  private constructor(
    readonly gitdir: string,
    private readonly fs: { promises: GitFsPromises },
  ) {}

  /**
   * Opens the bare clone in `gitdir`, creating an empty one when absent. `files` is the file
   * system under the whole-file writes (tests give one that fails).
   */
  static async open(gitdir: string, files?: GitFsPromises): Promise<BareRepo> {
    const fs = wholeWritesFs(files);
    await mkdir(gitdir, { recursive: true });
    if (!nodeFs.existsSync(join(gitdir, "HEAD")))
      await git.init({ fs, gitdir, bare: true, defaultBranch: "main" });
    await mkdir(join(gitdir, "objects", "pack"), { recursive: true });
    return new BareRepo(gitdir, fs);
  }

  async hasObject(oid: string): Promise<boolean> {
    try {
      await git.readObject({ fs: this.fs, gitdir: this.gitdir, oid, format: "deflated", cache: this.cache });
      return true;
    } catch {
      return false;
    }
  }

  /** Local ref value (`refs/heads/<b>` mirrors the remote tip as last seen), or undefined. */
  async readRef(ref: string): Promise<string | undefined> {
    try {
      return await git.resolveRef({ fs: this.fs, gitdir: this.gitdir, ref });
    } catch {
      return undefined;
    }
  }

  async writeRef(ref: string, oid: string): Promise<void> {
    await git.writeRef({ fs: this.fs, gitdir: this.gitdir, ref, value: oid, force: true });
  }

  /**
   * Reads the branch tip from the server (one `ls-refs`, shared with the other branches of the
   * repository read at the time) and, only when this clone lacks it, downloads the missing
   * objects (one upload-pack). Returns the tip, or undefined when the branch
   * does not exist. `haves` are commits we hold that the server may share with the tip; `hint`
   * is the commit a push notice says the branch moved to, downloaded beside the read.
   */
  async fetchBranch(
    remote: Remote,
    branch: string,
    haves: string[] = [],
    hint?: string,
  ): Promise<{ tip: string | undefined; downloaded: boolean }> {
    // A push notice names the commit the branch moved to: its download starts beside the read of
    // the tip instead of after it. A hint that is not the tip (a later push, a forced one) costs
    // a download the read then ignores; one the host refuses (gone, unreachable) is dropped.
    let hinted: Promise<boolean> | undefined;
    if (hint && /^[0-9a-f]{40}$/.test(hint) && hint !== ZERO_OID && !(await this.hasObject(hint)))
      hinted = this.download(remote, hint, haves).then(
        () => true,
        () => false,
      );
    const tip = await this.refReads.tip(remote, branch);
    if (!tip) return { tip: undefined, downloaded: false };
    if (tip === hint && hinted && (await hinted) && (await this.hasObject(tip)))
      return { tip, downloaded: true };
    if (await this.hasObject(tip)) return { tip, downloaded: false };
    // Every branch a replica takes is baselined at once, and many sit at one tip: one download
    // serves them all. One that failed is no proof for the others: each then downloads itself.
    const under = this.downloads.get(tip);
    if (under) {
      const shared = await under.then(
        () => true,
        () => false,
      );
      if (shared && (await this.hasObject(tip))) return { tip, downloaded: false };
    }
    await this.download(remote, tip, haves);
    return { tip, downloaded: true };
  }

  /** Downloads what `tip` needs that the clone lacks (one upload-pack), shared by every caller at once. */
  private async download(remote: Remote, tip: string, haves: string[]): Promise<void> {
    const download = (async () => {
      const known = await this.knownTips(haves);
      await this.storePack(await uploadPack(remote, [tip], known));
    })();
    this.downloads.set(tip, download);
    try {
      await download;
    } finally {
      if (this.downloads.get(tip) === download) this.downloads.delete(tip);
    }
  }

  /**
   * The tags the server holds now (one `ls-refs` of `refs/tags/`, or the v0 advertisement from a
   * host that does not speak v2): each name (without `refs/tags/`), the object its ref names and
   * the commit it peels to. An annotated tag's ref names a tag object and the server gives its
   * peeled commit (`^{}`); a lightweight tag's names the commit.
   */
  async remoteTags(remote: Remote): Promise<RemoteTag[]> {
    const refs = await this.refReads.tags(remote);
    const out: RemoteTag[] = [];
    for (const [ref, object] of refs) {
      if (ref.endsWith("^{}")) continue;
      const peeled = refs.get(`${ref}^{}`);
      out.push({
        name: ref.slice("refs/tags/".length),
        object,
        commit: peeled ?? object,
        annotated: peeled !== undefined,
      });
    }
    return out;
  }

  /**
   * Downloads the objects of `oids` this clone lacks (one upload-pack, only when some are
   * missing), telling the server we hold `haves`: the tag objects of the tags a claim reads.
   */
  async fetchObjects(remote: Remote, oids: readonly string[], haves: string[] = []): Promise<void> {
    const missing: string[] = [];
    for (const oid of new Set(oids)) if (!(await this.hasObject(oid))) missing.push(oid);
    if (missing.length === 0) return;
    await this.storePack(await uploadPack(remote, missing, await this.knownTips(haves)));
  }

  /** A tag object's bytes as Git stores them (for its signature). */
  readRawTag(oid: string): Promise<Uint8Array> {
    return this.readRaw(oid, "tag");
  }

  /** An object's bytes as Git stores them, when it is of `type`. */
  private async readRaw(oid: string, type: "tag" | "commit"): Promise<Uint8Array> {
    const o = await git.readObject({
      fs: this.fs,
      gitdir: this.gitdir,
      oid,
      format: "content",
      cache: this.cache,
    });
    if (o.type !== type) throw new Error(`${oid} is a ${o.type}, not a ${type}`);
    return o.object as Uint8Array;
  }

  /** Reads only the server's tip of the branch (no download). */
  async remoteTip(remote: Remote, branch: string): Promise<string | undefined> {
    return this.refReads.tip(remote, branch);
  }

  /**
   * Commits to tell upload-pack we hold: the caller's own (the branch's last tip, its last
   * commit), or when it holds none of those, other branches' tips up to HAVES_MAX. A branch's
   * last tip is what a push builds on, so the pack is as small with it alone; listing the clone's
   * branches (a thousand files at N = 1,000) for every wake's download cost more than it saved.
   */
  private async knownTips(extra: string[]): Promise<string[]> {
    const out = new Set<string>();
    for (const oid of extra) if (oid && (await this.hasObject(oid))) out.add(oid);
    if (out.size > 0) return [...out].slice(0, HAVES_MAX);
    const branches = await git.listBranches({ fs: this.fs, gitdir: this.gitdir });
    for (const ref of branches.slice(0, HAVES_MAX)) {
      const oid = await this.readRef(`refs/heads/${ref}`);
      if (oid) out.add(oid);
    }
    return [...out];
  }

  private async storePack(pack: Buffer): Promise<void> {
    const name = `pack-${pack.subarray(pack.length - 20).toString("hex")}`;
    const dir = join(this.gitdir, "objects", "pack");
    // Written under a name of its own: two downloads may bring the same pack.
    const tmp = join(dir, `tmp-${name}-${randomBytes(6).toString("hex")}.pack`);
    await writeFile(tmp, pack);
    await rename(tmp, join(dir, `${name}.pack`));
    await git.indexPack({
      fs: this.fs,
      dir: this.gitdir,
      gitdir: this.gitdir,
      filepath: `objects/pack/${name}.pack`,
      cache: this.cache,
    });
  }

  private async readTreeEntries(oid: string): Promise<TreeEntry[]> {
    const hit = this.trees.get(oid);
    if (hit) return hit;
    const { tree } = await git.readTree({ fs: this.fs, gitdir: this.gitdir, oid, cache: this.cache });
    const entries = tree as TreeEntry[];
    if (this.trees.size > 20_000) this.trees.delete(this.trees.keys().next().value as string);
    this.trees.set(oid, entries);
    return entries;
  }

  async treeOf(commit: string): Promise<string> {
    const { commit: c } = await git.readCommit({
      fs: this.fs,
      gitdir: this.gitdir,
      oid: commit,
      cache: this.cache,
    });
    return c.tree;
  }

  async readCommit(
    oid: string,
  ): Promise<{ message: string; parents: string[]; tree: string; timestamp: number }> {
    const { commit } = await git.readCommit({ fs: this.fs, gitdir: this.gitdir, oid, cache: this.cache });
    return {
      message: commit.message,
      parents: commit.parent,
      tree: commit.tree,
      timestamp: commit.committer.timestamp,
    };
  }

  /** A commit object's bytes as Git stores them (for its signature: what was signed is in them). */
  readRawCommit(oid: string): Promise<Uint8Array> {
    return this.readRaw(oid, "commit");
  }

  /** Content of a file at a commit, or undefined when absent. */
  async readFile(commit: string, path: string): Promise<Buffer | undefined> {
    let oid = await this.treeOf(commit);
    const parts = path.split("/");
    for (let i = 0; i < parts.length; i++) {
      const entry = (await this.readTreeEntries(oid)).find((e) => e.path === parts[i]);
      if (!entry) return undefined;
      if (i < parts.length - 1 && entry.type !== "tree") return undefined;
      oid = entry.oid;
    }
    const { blob } = await git.readBlob({ fs: this.fs, gitdir: this.gitdir, oid, cache: this.cache });
    return Buffer.from(blob);
  }

  /** Names of the files (blobs) directly in folder `dir` at `commit`; none when it is absent. */
  async listFiles(commit: string, dir: string): Promise<string[]> {
    let oid = await this.treeOf(commit);
    for (const part of dir.split("/").filter(Boolean)) {
      const entry = (await this.readTreeEntries(oid)).find((e) => e.path === part);
      if (entry?.type !== "tree") return [];
      oid = entry.oid;
    }
    return (await this.readTreeEntries(oid)).filter((e) => e.type === "blob").map((e) => e.path);
  }

  /**
   * Whether the tree of `commit` holds the folder `path` (`.` is the root). Git keeps no empty
   * folder, so a folder in the tree holds at least one file.
   */
  async hasFolder(commit: string, path: string): Promise<boolean> {
    return (await this.hasFolders(commit, [path]))[0] === true;
  }

  /** `hasFolder` for several paths, reading the commit once. */
  async hasFolders(commit: string, paths: string[]): Promise<boolean[]> {
    const root = await this.treeOf(commit);
    const out: boolean[] = [];
    for (const path of paths) {
      const trimmed = path.replace(/^\/+|\/+$/g, "");
      let oid = root;
      let found = true;
      if (trimmed === "" || trimmed === ".") found = (await this.readTreeEntries(oid)).length > 0;
      else
        for (const part of trimmed.split("/")) {
          const entry = (await this.readTreeEntries(oid)).find((e) => e.path === part);
          if (entry?.type !== "tree") {
            found = false;
            break;
          }
          oid = entry.oid;
        }
      out.push(found);
    }
    return out;
  }

  /**
   * Writes one commit on `parent` (undefined for a first commit) with the changes applied to its
   * tree. Returns undefined when the changes leave the tree as it was: empty changes make no commit.
   */
  async commitChanges(
    parent: string | undefined,
    changes: FileChange[],
    spec: CommitSpec,
  ): Promise<WrittenCommit | undefined> {
    const baseTree = parent ? await this.treeOf(parent) : undefined;
    const newOids: string[] = [];
    const nested = new Map<string, FileChange[]>();
    for (const c of changes) nested.set(c.path, [...(nested.get(c.path) ?? []), c]);
    // The last change to a path wins within one commit.
    const last = [...nested.values()].map((cs) => cs[cs.length - 1] as FileChange);
    const tree = (await this.updateTree(baseTree, last, newOids)) ?? (await this.emptyTree(newOids));
    if (tree === baseTree) return undefined;
    const committer = spec.committer ?? spec.author;
    const commit = await git.writeCommit({
      fs: this.fs,
      gitdir: this.gitdir,
      commit: {
        message: spec.message.endsWith("\n") ? spec.message : `${spec.message}\n`,
        tree,
        parent: parent ? [parent] : [],
        author: { ...spec.author, timezoneOffset: 0 },
        committer: { ...committer, timezoneOffset: 0 },
      },
    });
    newOids.push(commit);
    return { commit, tree, newOids };
  }

  private async emptyTree(newOids: string[]): Promise<string> {
    const oid = await git.writeTree({ fs: this.fs, gitdir: this.gitdir, tree: [] });
    newOids.push(oid);
    return oid;
  }

  /** Rewrites the tree `oid` with changes relative to it; undefined when the result is empty. */
  private async updateTree(
    oid: string | undefined,
    changes: FileChange[],
    newOids: string[],
  ): Promise<string | undefined> {
    const entries = new Map<string, TreeEntry>();
    if (oid) for (const e of await this.readTreeEntries(oid)) entries.set(e.path, e);
    const sub = new Map<string, FileChange[]>();
    let changed = false;
    for (const c of changes) {
      const slash = c.path.indexOf("/");
      if (slash >= 0) {
        const head = c.path.slice(0, slash);
        sub.set(head, [...(sub.get(head) ?? []), { path: c.path.slice(slash + 1), content: c.content }]);
        continue;
      }
      const before = entries.get(c.path);
      if (c.content === null) {
        if (before) {
          entries.delete(c.path);
          changed = true;
        }
        continue;
      }
      const blob = await this.writeBlob(c.content);
      if (before && before.oid === blob && before.type === "blob") continue;
      // Sent even when we held it already: it may come from a commit that was never pushed.
      newOids.push(blob);
      entries.set(c.path, { mode: "100644", path: c.path, oid: blob, type: "blob" });
      changed = true;
    }
    for (const [name, subChanges] of sub) {
      const before = entries.get(name);
      const beforeTree = before?.type === "tree" ? before.oid : undefined;
      const after = await this.updateTree(beforeTree, subChanges, newOids);
      if (after === beforeTree) continue;
      changed = true;
      if (after === undefined) entries.delete(name);
      else entries.set(name, { mode: "040000", path: name, oid: after, type: "tree" });
    }
    if (!changed) return oid;
    if (entries.size === 0) return undefined;
    const tree = [...entries.values()];
    const written = await git.writeTree({ fs: this.fs, gitdir: this.gitdir, tree });
    if (written !== oid) newOids.push(written);
    this.trees.set(written, tree);
    return written;
  }

  /** Writes a blob unless one with its id is here already; returns the id. */
  private async writeBlob(content: string | Buffer): Promise<string> {
    const buf = typeof content === "string" ? Buffer.from(content) : content;
    const oid = createHash("sha1").update(`blob ${buf.length}\0`).update(buf).digest("hex");
    if (!(await this.hasObject(oid))) await git.writeBlob({ fs: this.fs, gitdir: this.gitdir, blob: buf });
    return oid;
  }

  /** A pack (no deltas) of exactly these objects. */
  async packOf(oids: string[]): Promise<Buffer> {
    const unique = [...new Set(oids)];
    const { packfile } = await git.packObjects({
      fs: this.fs,
      gitdir: this.gitdir,
      oids: unique,
      cache: this.cache,
    });
    return Buffer.from(packfile as Uint8Array);
  }

  /**
   * Compare-and-swap push: moves `refs/heads/<branch>` from `oldOid` (undefined: the branch does
   * not exist yet) to `newOid`, sending only `oids`. One request.
   */
  async push(
    remote: Remote,
    branch: string,
    oldOid: string | undefined,
    newOid: string,
    oids: string[],
  ): Promise<void> {
    const pack = await this.packOf(oids);
    await receivePack(remote, { ref: `refs/heads/${branch}`, oldOid: oldOid ?? ZERO_OID, newOid }, pack);
  }
}
