// How a tool set is built: the go build command lines and where their output goes. Everything that
// changes a binary is in this file, tools.ts or the set's go.mod/go.sum; their hash names the
// cache folder, so a change to any of them builds anew and nothing else does.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { basename, join } from "node:path";
import { fileURLToPath } from "node:url";
import { fillVersionFlag, TOOL_SETS, type ToolSet } from "./tools.js";

const toolsDir = fileURLToPath(new URL(".", import.meta.url));
const RECIPE_FILES = ["tools.ts", "recipe.ts"].map((f) => join(toolsDir, f));

/** Outside the repository: built binaries are never part of it. */
export function cacheRoot(env: NodeJS.ProcessEnv = process.env): string {
  if (env.APPLYGATE_REAL_CACHE) return env.APPLYGATE_REAL_CACHE;
  return join(env.XDG_CACHE_HOME || join(homedir(), ".cache"), "applygate-real");
}

/** `<set>-<hash>`: the hash of the set's go.mod and go.sum and of the recipe. */
export function setKey(tool: ToolSet): string {
  const hash = createHash("sha256");
  for (const file of [
    join(toolsDir, tool.set, "go.mod"),
    join(toolsDir, tool.set, "go.sum"),
    ...RECIPE_FILES,
  ]) {
    hash.update(`${basename(file)}\0`);
    hash.update(readFileSync(file));
    hash.update("\0");
  }
  return `${tool.set}-${hash.digest("hex").slice(0, 16)}`;
}

export const setCacheDir = (tool: ToolSet, root = cacheRoot()): string => join(root, setKey(tool));
export const binDir = (tool: ToolSet, root = cacheRoot()): string => join(setCacheDir(tool, root), "bin");

export interface ModuleFacts {
  /** The set's main upstream module version, e.g. v1.36.3. */
  version: string;
  /** Its release time, RFC 3339 (used as the build date: the same source gives the same binary). */
  time: string;
  /** Versions of the modules our go.mod resolves, for `{require:…}`. */
  requireOf: (module: string) => string;
}

export function ldflags(tool: ToolSet, facts: ModuleFacts): string {
  const flags = ["-s", "-w"];
  for (const f of tool.ldflags ?? []) {
    flags.push(`-X ${f.variable}=${fillVersionFlag(f.value, facts.version, facts.time, facts.requireOf)}`);
  }
  return flags.join(" ");
}

/**
 * The go build invocations of a set. Binaries named like their package's last element are built
 * in one command, which compiles their shared packages once and links them side by side.
 */
export function buildCommands(tool: ToolSet, facts: ModuleFacts, outDir: string): string[][] {
  const common = ["build", "-trimpath", "-ldflags", ldflags(tool, facts)];
  const together = tool.binaries.filter((b) => basename(b.pkg) === b.name);
  const alone = tool.binaries.filter((b) => basename(b.pkg) !== b.name);
  const commands: string[][] = [];
  if (together.length > 0) commands.push([...common, "-o", `${outDir}/`, ...together.map((b) => b.pkg)]);
  for (const b of alone) commands.push([...common, "-o", join(outDir, b.name), b.pkg]);
  return commands;
}

export const allBinaryNames = (): string[] =>
  TOOL_SETS.flatMap((t) => [...t.binaries.map((b) => b.name), ...Object.keys(t.aliases ?? {})]);
