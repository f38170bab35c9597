/**
 * Somebody else: a concurrent writer that clones, commits and pushes with the real `git` CLI, the
 * way a person or another tool would, so the worker's compare-and-swap meets real contention.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { git, gitOk } from "./cli.js";

export interface PushOutcome {
  ok: boolean;
  /** The server refused because the branch moved (non-fast-forward / fetch first). */
  rejected: boolean;
  stderr: string;
}

export class GitPeer {
  private constructor(
    readonly dir: string,
    readonly branch: string,
  ) {}

  static async clone(url: string, branch = "main"): Promise<GitPeer> {
    const dir = await mkdtemp(join(tmpdir(), "applygate-peer-"));
    await gitOk(["clone", "-q", "-b", branch, url, dir]);
    return new GitPeer(dir, branch);
  }

  async writeFile(path: string, content: string): Promise<void> {
    await mkdir(dirname(join(this.dir, path)), { recursive: true });
    await writeFile(join(this.dir, path), content);
  }

  readFile(path: string): Promise<string> {
    return readFile(join(this.dir, path), "utf8");
  }

  async commit(message: string): Promise<string> {
    await gitOk(["add", "-A"], { cwd: this.dir });
    await gitOk(["commit", "-q", "--allow-empty", "-m", message], { cwd: this.dir });
    return (await gitOk(["rev-parse", "HEAD"], { cwd: this.dir })).trim();
  }

  async push(): Promise<PushOutcome> {
    const r = await git(["push", "-q", "origin", `HEAD:refs/heads/${this.branch}`], { cwd: this.dir });
    const rejected = /rejected|fetch first|non-fast-forward|failed to update ref/i.test(r.stderr);
    return { ok: r.code === 0, rejected: r.code !== 0 && rejected, stderr: r.stderr };
  }

  /** Fetches and rebases local commits onto the remote tip (what a person does after a rejection). */
  async pullRebase(): Promise<void> {
    await gitOk(["pull", "-q", "--rebase", "origin", this.branch], { cwd: this.dir });
  }

  /**
   * Sets a file and pushes; on a rejection takes the remote tip and sets the file again on top (a
   * rebase would stop on a conflict when the branch changed the same lines meanwhile), until it
   * lands (at most `tries`).
   */
  async commitAndPush(path: string, content: string, message: string, tries = 50): Promise<string> {
    for (let i = 0; i < tries; i++) {
      await this.writeFile(path, content);
      await this.commit(message);
      const out = await this.push();
      if (out.ok) return (await gitOk(["rev-parse", "HEAD"], { cwd: this.dir })).trim();
      if (!out.rejected) throw new Error(`push failed: ${out.stderr.trim()}`);
      await gitOk(["fetch", "-q", "origin", this.branch], { cwd: this.dir });
      await gitOk(["reset", "-q", "--hard", `origin/${this.branch}`], { cwd: this.dir });
    }
    throw new Error(`push did not land after ${tries} tries`);
  }

  async log(): Promise<string[]> {
    await gitOk(["fetch", "-q", "origin", this.branch], { cwd: this.dir });
    const out = await gitOk(["log", "--format=%H %s", `origin/${this.branch}`], { cwd: this.dir });
    return out.trim().split("\n").filter(Boolean);
  }

  async remove(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }
}
