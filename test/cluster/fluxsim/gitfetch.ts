/**
 * source-controller's Git checkout, with the real git CLI against the real Git server: ask the
 * remote for the branch tip first (an unchanged tip fetches nothing, like the optimised clone),
 * else fetch that one commit shallowly into a scratch repository and read its whole tree.
 */
import { spawn } from "node:child_process";
import { mkdir } from "node:fs/promises";
import { git, gitOk } from "../../git/cli.js";

export async function remoteTip(url: string, branch: string): Promise<string> {
  const r = await git(["ls-remote", "--heads", url, `refs/heads/${branch}`]);
  if (r.code !== 0) throw new Error(r.stderr.trim() || `ls-remote exited ${r.code}`);
  const sha = r.stdout.split(/\s+/)[0];
  if (!sha) throw new Error(`couldn't find remote ref 'refs/heads/${branch}'`);
  return sha;
}

const initialised = new Set<string>();

/** Fetches the branch into `scratch` (a bare repository, made on first use); returns tip and files. */
export async function fetchTree(
  scratch: string,
  url: string,
  branch: string,
): Promise<{ sha: string; files: Map<string, string> }> {
  if (!initialised.has(scratch)) {
    await mkdir(scratch, { recursive: true });
    await gitOk(["init", "-q", "--bare", scratch]);
    initialised.add(scratch);
  }
  await gitOk(["fetch", "-q", "--depth", "1", "--no-tags", url, `+refs/heads/${branch}:refs/fluxsim/head`], {
    cwd: scratch,
  });
  const sha = (await gitOk(["rev-parse", "refs/fluxsim/head"], { cwd: scratch })).trim();
  const listing = await gitOk(["ls-tree", "-r", "-z", "--full-tree", sha], { cwd: scratch });
  const blobs: { path: string; id: string }[] = [];
  for (const line of listing.split("\0")) {
    if (!line) continue;
    const tab = line.indexOf("\t");
    const [, type, id] = line.slice(0, tab).split(" ");
    if (type === "blob" && id) blobs.push({ path: line.slice(tab + 1), id });
  }
  const contents = await catBlobs(
    scratch,
    blobs.map((b) => b.id),
  );
  const files = new Map<string, string>();
  for (const [i, b] of blobs.entries()) files.set(b.path, contents[i] ?? "");
  return { sha, files };
}

/** Reads many blobs through one `git cat-file --batch`. */
function catBlobs(cwd: string, ids: string[]): Promise<string[]> {
  if (ids.length === 0) return Promise.resolve([]);
  return new Promise((resolve, reject) => {
    const child = spawn("git", ["cat-file", "--batch"], { cwd });
    const chunks: Buffer[] = [];
    child.stdout.on("data", (c: Buffer) => chunks.push(c));
    child.stderr.resume();
    child.on("error", reject);
    child.on("close", (code) => {
      if (code !== 0) return reject(new Error(`git cat-file exited ${code}`));
      const buf = Buffer.concat(chunks);
      const out: string[] = [];
      let at = 0;
      for (let i = 0; i < ids.length; i++) {
        const nl = buf.indexOf(10, at);
        const header = buf.subarray(at, nl).toString();
        const size = Number(header.split(" ")[2]);
        out.push(buf.subarray(nl + 1, nl + 1 + size).toString("utf8"));
        at = nl + 1 + size + 1;
      }
      resolve(out);
    });
    child.stdin.end(`${ids.join("\n")}\n`);
  });
}
