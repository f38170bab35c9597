import { execFile } from "node:child_process";

export interface GitResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** How many git processes this process started (a probe that polls should start few). */
export const gitSpawns = { n: 0 };

/**
 * Runs the real `git` CLI asynchronously. Never use execFileSync in tests that serve Git
 * in-process: it blocks the event loop that has to answer the CLI's own requests.
 */
export function git(
  args: string[],
  opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<GitResult> {
  gitSpawns.n++;
  return new Promise((resolve) => {
    execFile(
      "git",
      args,
      {
        cwd: opts.cwd,
        env: {
          ...process.env,
          GIT_TERMINAL_PROMPT: "0",
          GIT_AUTHOR_NAME: "Somebody Else",
          GIT_AUTHOR_EMAIL: "someone@example.com",
          GIT_COMMITTER_NAME: "Somebody Else",
          GIT_COMMITTER_EMAIL: "someone@example.com",
          ...opts.env,
        },
        maxBuffer: 64 * 1024 * 1024,
      },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === "number" ? err.code : 1) : 0;
        resolve({ code, stdout: String(stdout), stderr: String(stderr) });
      },
    );
  });
}

/** Like git() but throws with stderr when the command fails. */
export async function gitOk(
  args: string[],
  opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<string> {
  const r = await git(args, opts);
  if (r.code !== 0) throw new Error(`git ${args.join(" ")} failed (${r.code}): ${r.stderr.trim()}`);
  return r.stdout;
}
