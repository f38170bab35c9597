/**
 * The repo-server's part: resolve a source revision (a SHA, a branch, a tag or HEAD) against the
 * real Git server and read the manifests of a directory at a commit. One bare cache per repository
 * URL, fetched with the git CLI; removed on close.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, posix } from "node:path";
import { parseAllDocuments, parse as parseYaml } from "yaml";
import { git, gitOk } from "../../git/cli.js";
import type { KObj } from "./types.js";

const SHA = /^[0-9a-f]{40}$/;

export class GitSource {
  private root?: string;
  private readonly caches = new Map<string, Promise<string>>();
  private readonly locks = new Map<string, Promise<unknown>>();
  /** A commit's tree never changes, so what was read from it is kept. */
  private readonly read = new Map<string, Promise<KObj[]>>();

  /** The commit a revision names now; "" and HEAD mean the remote's default branch. */
  async resolve(repoURL: string, revision: string | undefined): Promise<string> {
    const rev = revision?.trim() ?? "";
    if (SHA.test(rev)) return rev;
    const refs = await advertisedRefs(repoURL);
    const candidates =
      rev === "" || rev === "HEAD"
        ? ["HEAD"]
        : [rev, `refs/heads/${rev}`, `refs/tags/${rev}^{}`, `refs/tags/${rev}`];
    for (const c of candidates) {
      const sha = refs.get(c);
      if (sha) return sha;
    }
    throw new Error(`Unable to resolve '${rev}' to a commit SHA`);
  }

  /** The objects of the directory at the commit (recursing only when asked, as Argo CD does). */
  async manifests(repoURL: string, commit: string, path: string, recurse = false): Promise<KObj[]> {
    const k = JSON.stringify([repoURL, commit, path, recurse]);
    let p = this.read.get(k);
    if (!p) {
      p = this.readManifests(repoURL, commit, path, recurse);
      this.read.set(k, p);
      p.catch(() => this.read.delete(k));
    }
    return structuredClone(await p);
  }

  private async readManifests(
    repoURL: string,
    commit: string,
    path: string,
    recurse: boolean,
  ): Promise<KObj[]> {
    const dir = await this.fetched(repoURL, commit);
    const base = posix
      .normalize(path || ".")
      .replace(/^\.\/?/, "")
      .replace(/\/$/, "");
    const listing = await git(["ls-tree", "-r", "--name-only", commit, ...(base ? [`${base}/`] : [])], {
      cwd: dir,
    });
    if (listing.code !== 0) throw new Error(listing.stderr.trim());
    const files = listing.stdout
      .split("\n")
      .filter(Boolean)
      .filter((f) => recurse || posix.dirname(f) === (base || "."));
    if (files.length === 0 && base) {
      const tree = await git(["cat-file", "-t", `${commit}:${base}`], { cwd: dir });
      if (tree.code !== 0 || tree.stdout.trim() !== "tree")
        throw new Error(`${path}: app path does not exist`);
    }
    const objects: KObj[] = [];
    for (const file of files.filter((f) => /\.(ya?ml|json)$/.test(f)).sort()) {
      const text = await gitOk(["show", `${commit}:${file}`], { cwd: dir });
      const docs = file.endsWith(".json")
        ? [parseYaml(text)]
        : parseAllDocuments(text).map((d) => d.toJSON());
      for (const doc of docs) {
        if (!doc || typeof doc !== "object") continue;
        const o = doc as KObj;
        if (!o.apiVersion || !o.kind) throw new Error(`${file}: object has no apiVersion or kind`);
        if (o.kind === "Kustomization" && o.apiVersion.startsWith("kustomize.config.k8s.io")) continue;
        objects.push(o);
      }
    }
    return objects;
  }

  private async fetched(repoURL: string, commit: string): Promise<string> {
    let dir = this.caches.get(repoURL);
    if (!dir) {
      dir = (async () => {
        this.root ??= await mkdtemp(join(tmpdir(), "argosim-repo-"));
        const d = join(this.root, String(this.caches.size));
        await gitOk(["init", "-q", "--bare", d]);
        return d;
      })();
      this.caches.set(repoURL, dir);
    }
    const d = await dir;
    // One fetch per repository at a time; a commit already present needs none.
    const prev = this.locks.get(repoURL) ?? Promise.resolve();
    const run = prev.then(async () => {
      const has = await git(["cat-file", "-e", `${commit}^{commit}`], { cwd: d });
      if (has.code === 0) return;
      await gitOk(
        ["fetch", "-q", "--prune", repoURL, "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"],
        {
          cwd: d,
        },
      );
      const again = await git(["cat-file", "-e", `${commit}^{commit}`], { cwd: d });
      if (again.code !== 0) throw new Error(`revision ${commit} must be resolved`);
    });
    this.locks.set(
      repoURL,
      run.catch(() => {}),
    );
    await run;
    return d;
  }

  async close(): Promise<void> {
    if (this.root) await rm(this.root, { recursive: true, force: true });
  }
}

/**
 * The refs a smart-HTTP server advertises (protocol v0: one request, no git process here), as
 * `git ls-remote` would list them, HEAD first.
 */
async function advertisedRefs(repoURL: string): Promise<Map<string, string>> {
  const url = new URL(`${repoURL.replace(/\/$/, "")}/info/refs?service=git-upload-pack`);
  const headers: Record<string, string> = {};
  if (url.username) {
    headers.Authorization = `Basic ${Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString("base64")}`;
    url.username = "";
    url.password = "";
  }
  const res = await fetch(url, { headers });
  if (!res.ok) throw new Error(`failed to list refs of ${repoURL}: ${res.status}`);
  const body = Buffer.from(await res.arrayBuffer());
  const refs = new Map<string, string>();
  for (let at = 0; at + 4 <= body.length; ) {
    const len = Number.parseInt(body.subarray(at, at + 4).toString(), 16);
    if (!len) {
      at += 4;
      continue;
    }
    const line =
      body
        .subarray(at + 4, at + len)
        .toString()
        .replace(/\n$/, "")
        .split("\0")[0] ?? "";
    at += len;
    const m = /^([0-9a-f]{40}) (.+)$/.exec(line);
    if (m?.[1] && m[2]) refs.set(m[2], m[1]);
  }
  return refs;
}
