// npm run real:build [-- set…]: builds the real Kubernetes, etcd, Flux, Argo CD, kustomize and
// helm binaries that are missing from the cache (test/real/tools/recipe.ts says where), from our
// go.mod files under test/real/tools/. A set whose folder exists is current and is not touched.
// REAL_BUILD_BUDGET_SECONDS bounds the whole run (CI gives what its own limit leaves): past it the
// builds stop, and what Go compiled stays in its build cache for the next run to go on from.
// Exit codes: 0 built or current, 1 a build failed, 3 no Go toolchain on this machine, 4 the Go
// module proxy did not give the modules (unreachable, or it refused one: the message names it),
// 5 the budget ran out before every set was built.
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, readdir, readFile, rename, rm, symlink, writeFile } from "node:fs/promises";
import { basename, join } from "node:path";
import { promisify } from "node:util";
import { errorMessage } from "../../queue/errors.js";
import { findGo, goEnv, goOutput, runGo, setDir } from "./tools/go.js";
import { binDir, buildCommands, cacheRoot, type ModuleFacts, setCacheDir } from "./tools/recipe.js";
import { TOOL_SETS, type ToolSet, toolSet } from "./tools/tools.js";

const execFileAsync = promisify(execFile);
const NICENESS = 19;
const started = Date.now();

const elapsed = (since: number): string => {
  const s = Math.round((Date.now() - since) / 1000);
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
};
const say = (set: string, text: string): void =>
  console.log(`[real:build ${elapsed(started)}] ${set}: ${text}`);

async function moduleFacts(tool: ToolSet): Promise<ModuleFacts> {
  const dir = setDir(tool.set);
  const list = await goOutput(["list", "-m", "-json", "all"], dir);
  // go list -m -json prints one object after another; split them at each top-level close.
  const modules = list
    .split(/\n}\n/)
    .filter((chunk) => chunk.trim())
    .map((chunk) => JSON.parse(`${chunk}\n}`) as { Path: string; Version?: string; Time?: string });
  const byPath = new Map(modules.map((m) => [m.Path, m]));
  const mainModule = byPath.get(tool.main);
  if (!mainModule?.Version) throw new Error(`${tool.set}: ${tool.main} is not in the module graph`);
  return {
    version: mainModule.Version,
    time: mainModule.Time ?? "1970-01-01T00:00:00Z",
    requireOf: (module) => {
      const found = byPath.get(module)?.Version;
      if (!found) throw new Error(`${tool.set}: ${module} is not in the module graph`);
      return found;
    },
  };
}

/** What each binary says about itself, and the upstream module versions its build info names. */
async function describe(tool: ToolSet, bin: string): Promise<string[]> {
  const lines: string[] = [];
  const upstream = new Set(tool.replacesFrom);
  for (const b of tool.binaries) {
    const file = join(bin, b.name);
    const run = await execFileAsync(file, b.versionArgs, { timeout: 30_000 }).catch(
      (e: { stdout?: string; stderr?: string; message: string }) => {
        throw new Error(`${b.name} ${b.versionArgs.join(" ")} failed: ${e.stderr || e.message}`);
      },
    );
    const said = `${run.stdout}\n${run.stderr}`
      .split("\n")
      .map((l) => l.trim())
      .filter(Boolean);
    const info = await goOutput(["version", "-m", file], bin);
    const mods = info
      .split("\n")
      .map((l) => l.trim().split(/\s+/))
      .filter((f) => (f[0] === "mod" || f[0] === "dep" || f[0] === "=>") && upstream.has(f[1] ?? ""))
      .map((f) => `${f[1]} ${f[2]}`);
    const own = b.versionArgs.includes("--help")
      ? "(no version flag; --help ran)"
      : said.slice(0, 2).join(" | ");
    lines.push(`${b.name}: ${own}${mods.length ? ` [built from ${mods.join(", ")}]` : ""}`);
  }
  return lines;
}

const budget = new AbortController();
// CI starts the build in a process group of its own and ends that group when the run ends early;
// the compilers, each in a group of their own, are stopped with it.
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.once(signal, () => budget.abort(`stopped by ${signal}`));
}

async function build(tool: ToolSet): Promise<void> {
  if (budget.signal.aborted) throw new Error(`${tool.set} not started: ${budget.signal.reason}`);
  const root = cacheRoot();
  const final = setCacheDir(tool, root);
  const tmp = `${final}.tmp-${process.pid}`;
  const out = join(tmp, "bin");
  await rm(tmp, { recursive: true, force: true });
  await mkdir(out, { recursive: true });
  try {
    await buildInto(tool, tmp, out);
  } catch (err) {
    await rm(tmp, { recursive: true, force: true });
    throw err;
  }
  await rm(final, { recursive: true, force: true });
  await rename(tmp, final);
  // Older builds of the same set are dead weight once this one is in place. (The key is the one
  // this build started with: its files may have changed since, and then this build is older too.)
  for (const entry of await readdir(root)) {
    if (entry.startsWith(`${tool.set}-`) && entry !== basename(final) && !entry.includes(".tmp-")) {
      await rm(join(root, entry), { recursive: true, force: true });
    }
  }
}

async function buildInto(tool: ToolSet, tmp: string, out: string): Promise<void> {
  const t0 = Date.now();
  const facts = await moduleFacts(tool);
  const names = tool.binaries.map((b) => b.name).join(", ");
  say(tool.set, `building ${names} (${tool.main} ${facts.version})`);
  const ticker = setInterval(() => say(tool.set, `still building ${names}, ${elapsed(t0)}`), 60_000);
  try {
    for (const args of buildCommands(tool, facts, out)) {
      await runGo(args, { cwd: setDir(tool.set), niceness: NICENESS, signal: budget.signal });
    }
  } finally {
    clearInterval(ticker);
  }
  for (const [alias, target] of Object.entries(tool.aliases ?? {})) await symlink(target, join(out, alias));
  const described = await describe(tool, out);
  const seconds = Math.round((Date.now() - t0) / 1000);
  await writeFile(
    join(tmp, "versions.txt"),
    `${described.join("\n")}\nbuilt in ${seconds}s by ${await goOutput(["env", "GOVERSION"], tmp)}`,
  );
  say(tool.set, `built in ${elapsed(t0)}`);
  for (const line of described) console.log(`    ${line}`);
}

/** Runs `jobs` at most `limit` at a time, in the order given; every failure is reported. */
async function pool<T>(items: T[], limit: number, job: (item: T) => Promise<void>): Promise<unknown[]> {
  const failures: unknown[] = [];
  const queue = [...items];
  const worker = async (): Promise<void> => {
    for (let item = queue.shift(); item !== undefined; item = queue.shift()) {
      await job(item).catch((e: unknown) => failures.push(e));
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return failures;
}

async function main(): Promise<number> {
  const wanted = process.argv.slice(2);
  const sets = wanted.length > 0 ? wanted.map(toolSet) : TOOL_SETS;
  const root = cacheRoot();
  const missing = sets.filter((t) => !existsSync(binDir(t, root)));
  for (const t of sets.filter((s) => !missing.includes(s))) {
    const versions = await readFile(join(setCacheDir(t, root), "versions.txt"), "utf8").catch(() => "");
    say(t.set, `current (${setCacheDir(t, root)})`);
    for (const line of versions.split("\n").filter((l) => l.includes(": "))) console.log(`    ${line}`);
  }
  if (missing.length === 0) {
    console.log(`[real:build ${elapsed(started)}] all current in ${root}`);
    return 0;
  }
  if (!findGo()) {
    console.error(
      `[real:build] NOT BUILT: no Go toolchain (go on PATH or /usr/local/go/bin/go) to build ${missing
        .map((t) => t.set)
        .join(", ")}`,
    );
    return 3;
  }
  await mkdir(root, { recursive: true });
  const budgetSeconds = Number(process.env.REAL_BUILD_BUDGET_SECONDS ?? 0);
  const budgetTimer =
    budgetSeconds > 0
      ? setTimeout(() => budget.abort(`the budget of ${budgetSeconds}s ran out`), budgetSeconds * 1000)
      : undefined;
  budgetTimer?.unref();
  // Downloads are network-bound: all sets at once, before the CPU-bound builds.
  say(missing.map((t) => t.set).join(","), "go mod download");
  const downloads = await pool(missing, missing.length, async (t) => {
    const t0 = Date.now();
    await runGo(["mod", "download"], { cwd: setDir(t.set), env: goEnv(), signal: budget.signal });
    say(t.set, `modules downloaded (${elapsed(t0)})`);
  });
  if (downloads.length > 0) {
    for (const e of downloads)
      console.error(`[real:build] NOT BUILT: modules not downloaded: ${errorMessage(e)}`);
    return 4;
  }
  // Two at a time: on two cores one build's single-threaded link overlaps the other's compile.
  const jobs = Number(process.env.REAL_BUILD_JOBS ?? 2);
  const failures = await pool(missing, jobs, build);
  clearTimeout(budgetTimer);
  const du = await execFileAsync("du", ["-sh", root]).then((r) => r.stdout.split("\t")[0]);
  if (budget.signal.aborted) {
    const unbuilt = missing.filter((t) => !existsSync(binDir(t, root))).map((t) => t.set);
    console.error(
      `[real:build ${elapsed(started)}] NOT BUILT: ${unbuilt.join(", ")}: ${budget.signal.reason}; ` +
        "Go's build cache keeps what was compiled, and the next run goes on from there",
    );
    return 5;
  }
  for (const e of failures) console.error(`[real:build] FAILED: ${errorMessage(e)}`);
  console.log(`[real:build ${elapsed(started)}] done; ${root} holds ${du}`);
  return failures.length > 0 ? 1 : 0;
}

process.exitCode = await main();
