/** A commit made straight into a served bare repository, as another writer would: no request is counted. */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gitOk } from "../git/cli.js";

/** How a foreign commit is signed: git config (`-c` pairs) and environment for `commit-tree -S`. */
export interface ForeignSigning {
  config: string[];
  env?: NodeJS.ProcessEnv;
}

export async function foreignCommit(
  bare: string,
  path: string,
  content: string,
  branch = "main",
  signing?: ForeignSigning,
): Promise<string> {
  const tmp = await mkdtemp(join(tmpdir(), "applygate-foreign-"));
  try {
    const env = { GIT_INDEX_FILE: join(tmp, "index") };
    const file = join(tmp, "content");
    await writeFile(file, content);
    const old = (await gitOk(["rev-parse", `refs/heads/${branch}`], { cwd: bare })).trim();
    const blob = (await gitOk(["hash-object", "-w", file], { cwd: bare })).trim();
    await gitOk(["read-tree", old], { cwd: bare, env });
    await gitOk(["update-index", "--add", "--cacheinfo", `100644,${blob},${path}`], { cwd: bare, env });
    const tree = (await gitOk(["write-tree"], { cwd: bare, env })).trim();
    const sign = signing
      ? [...signing.config.flatMap((c) => ["-c", c]), "commit-tree", "-S"]
      : ["commit-tree"];
    const commit = (
      await gitOk([...sign, tree, "-p", old, "-m", `foreign ${path}`], {
        cwd: bare,
        ...(signing?.env ? { env: signing.env } : {}),
      })
    ).trim();
    await gitOk(["update-ref", `refs/heads/${branch}`, commit, old], { cwd: bare });
    return commit;
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}
