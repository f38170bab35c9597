/**
 * A lock held across processes on this machine, for a test that needs what only one process can
 * have at a time: the manifests' fixed ports, a Redis database it flushes. Two test runs on one
 * machine (two clean clones side by side) then take turns instead of failing each other with
 * EADDRINUSE or a flushed database. The lock is a directory (made atomically) holding the
 * holder's pid; a holder that died without letting go is found by its pid and its lock taken
 * over.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { errorCode } from "../../queue/errors.js";

/** Is a process with this pid alive on this machine (one of another user's counts)? */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return errorCode(err) === "EPERM";
  }
}

/** Waits for the lock `name` (at most `timeoutMs`) and answers its release. */
export async function machineLock(name: string, timeoutMs = 300_000): Promise<() => void> {
  const dir = join(tmpdir(), `applygate-lock-${name}`);
  const pidFile = join(dir, "pid");
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      mkdirSync(dir);
      writeFileSync(pidFile, String(process.pid));
      return () => rmSync(dir, { recursive: true, force: true });
    } catch (err) {
      if (errorCode(err) !== "EEXIST") throw err;
    }
    let holder: number | undefined;
    try {
      holder = Number(readFileSync(pidFile, "utf8"));
    } catch {
      holder = undefined; // made, its pid not written yet: the holder is alive
    }
    if (holder !== undefined && Number.isInteger(holder) && holder > 0 && !processAlive(holder)) {
      rmSync(dir, { recursive: true, force: true });
      continue;
    }
    if (Date.now() > deadline)
      throw new Error(`machine lock ${name} still held by pid ${holder ?? "?"} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
