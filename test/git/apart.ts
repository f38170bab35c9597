/**
 * The Git server of test/git/server.ts in a process of its own, for a benchmark whose own event
 * loop is busy (a simulated API server, an executor, polling): each request of the measured
 * process must not wait behind the benchmark's work. Serves the bare repositories under `root`
 * on an ephemeral loopback port until closed.
 */
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const MAIN = fileURLToPath(new URL("./apart-main.ts", import.meta.url));

export interface ApartGitServer {
  url: string;
  pid: number;
  close(): Promise<void>;
}

export async function serveGitApart(root: string): Promise<ApartGitServer> {
  const child = spawn(process.execPath, ["--import", "tsx", MAIN, root], {
    // stdin stays open while this process lives: its end tells the server we are gone.
    stdio: ["pipe", "pipe", "inherit"],
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const lines = createInterface({ input: child.stdout });
  const url = await new Promise<string>((resolve, reject) => {
    lines.once("line", (line) => {
      const u = (JSON.parse(line) as { url?: string }).url;
      if (u) resolve(u);
      else reject(new Error(`the Git server process said ${line}`));
    });
    child.once("exit", (code) => reject(new Error(`the Git server process exited with ${code}`)));
  });
  return {
    url,
    pid: child.pid as number,
    async close() {
      child.kill("SIGTERM");
      await exited;
    },
  };
}
