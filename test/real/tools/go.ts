// The Go toolchain as our scripts call it: found on PATH or where its tarball installs.
import { execFile, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const execFileAsync = promisify(execFile);

export const TOOLS_DIR = fileURLToPath(new URL(".", import.meta.url));
export const setDir = (set: string): string => join(TOOLS_DIR, set);

/** The go command, or undefined when this machine has none. */
export function findGo(): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(":")) {
    if (dir && existsSync(join(dir, "go"))) return join(dir, "go");
  }
  return existsSync("/usr/local/go/bin/go") ? "/usr/local/go/bin/go" : undefined;
}

export function requireGo(): string {
  const go = findGo();
  if (!go) throw new Error("no Go toolchain on PATH or in /usr/local/go/bin");
  return go;
}

/**
 * The environment every go command of ours runs with: static binaries, and the toolchain of this
 * machine (a go.mod asking for a newer Go fails loudly instead of fetching one behind our back).
 */
export function goEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    ...process.env,
    CGO_ENABLED: "0",
    GOTOOLCHAIN: "local",
    GOFLAGS: "-mod=readonly -buildvcs=false",
    ...extra,
  };
}

export async function goOutput(
  args: string[],
  cwd: string,
  env: NodeJS.ProcessEnv = goEnv(),
): Promise<string> {
  const { stdout } = await execFileAsync(requireGo(), args, { cwd, env, maxBuffer: 64 * 1024 * 1024 });
  return stdout;
}

export interface ModuleInfo {
  Path: string;
  Version: string;
  Time?: string;
  GoMod?: string;
  Dir?: string;
  Error?: { Err: string };
}

/** Downloads (if needed) one module version and tells where its go.mod and source are. */
export async function downloadModule(path: string, version: string, cwd: string): Promise<ModuleInfo> {
  const out = await goOutput(["mod", "download", "-json", `${path}@${version}`], cwd).catch((e: unknown) => {
    const stdout = (e as { stdout?: string }).stdout;
    if (stdout) return stdout;
    throw e;
  });
  const info = JSON.parse(out) as ModuleInfo;
  if (info.Error) throw new Error(`go mod download ${path}@${version}: ${info.Error.Err}`);
  return info;
}

export async function readUpstreamGoMod(path: string, version: string, cwd: string): Promise<string> {
  const info = await downloadModule(path, version, cwd);
  if (!info.GoMod) throw new Error(`no go.mod for ${path}@${version}`);
  return readFile(info.GoMod, "utf8");
}

/** Runs a go command under `nice`, its output going to `onLine` line by line. */
export function runGo(
  args: string[],
  opts: {
    cwd: string;
    env?: NodeJS.ProcessEnv;
    niceness?: number;
    onLine?: (line: string) => void;
    /** Ends the command and the compilers it started (its own process group). */
    signal?: AbortSignal;
  },
): Promise<void> {
  const go = requireGo();
  const [cmd, argv] = opts.niceness ? ["nice", ["-n", String(opts.niceness), go, ...args]] : [go, args];
  return new Promise((resolve, reject) => {
    if (opts.signal?.aborted) return reject(new Error(`go ${args[0]} not started: ${opts.signal.reason}`));
    const child = spawn(cmd, argv as string[], { cwd: opts.cwd, env: opts.env ?? goEnv(), detached: true });
    const abort = (): void => {
      if (child.pid) process.kill(-child.pid, "SIGTERM");
    };
    opts.signal?.addEventListener("abort", abort, { once: true });
    const tail: string[] = [];
    const feed = (chunk: Buffer): void => {
      for (const line of chunk.toString().split("\n")) {
        if (!line) continue;
        tail.push(line);
        if (tail.length > 40) tail.shift();
        opts.onLine?.(line);
      }
    };
    child.stdout.on("data", feed);
    child.stderr.on("data", feed);
    child.on("error", reject);
    child.on("close", (code, signal) => {
      opts.signal?.removeEventListener("abort", abort);
      if (opts.signal?.aborted) reject(new Error(`go ${args[0]} stopped: ${opts.signal.reason}`));
      else if (code === 0) resolve();
      else
        reject(
          new Error(`go ${args.join(" ")} failed (${signal ?? code}) in ${opts.cwd}:\n${tail.join("\n")}`),
        );
    });
  });
}
