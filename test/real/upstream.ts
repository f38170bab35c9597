// Upstream files (CRDs, install manifests) read from Go's module cache at the version a tool set's
// go.mod requires, checked against its go.sum: never copied into this repository. The build
// (`npm run real:build`) downloaded these modules; reading them needs no Go and no network.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { findGo, setDir } from "./tools/go.js";
import { parseGoMod } from "./tools/gomod.js";

/** Go's case-encoding of module paths in the cache: an upper-case letter is `!` and its lower case. */
export const escapeModulePath = (path: string): string =>
  path.replace(/[A-Z]/g, (c) => `!${c.toLowerCase()}`);

/** The module cache folder: GOMODCACHE, else the first GOPATH's pkg/mod, else what `go env` says. */
export function moduleCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.GOMODCACHE) return env.GOMODCACHE;
  const gopath = env.GOPATH?.split(":")[0] || join(homedir(), "go");
  const guess = join(gopath, "pkg", "mod");
  if (existsSync(guess)) return guess;
  const go = findGo();
  if (go) return execFileSync(go, ["env", "GOMODCACHE"], { encoding: "utf8" }).trim();
  return guess;
}

/** The `h1:` hash go.sum holds for a module's content (not its go.mod), or undefined. */
export function goSumHash(goSum: string, path: string, version: string): string | undefined {
  for (const line of goSum.split("\n")) {
    const [p, v, h] = line.trim().split(/\s+/);
    if (p === path && v === version) return h;
  }
  return undefined;
}

export interface UpstreamModule {
  path: string;
  version: string;
  /** The extracted module in the cache (read-only). */
  dir: string;
  read(file: string): string;
}

/**
 * The module `path` at the version tool set `set` requires, from the module cache. Fails, saying
 * what to run, when it is not there or its content is not the one go.sum pins.
 */
export function upstreamModule(set: string, path: string, cache = moduleCacheDir()): UpstreamModule {
  const goMod = parseGoMod(readFileSync(join(setDir(set), "go.mod"), "utf8"));
  const version = goMod.requires.find((r) => r.path === path)?.version;
  if (!version) throw new Error(`test/real/tools/${set}/go.mod requires no ${path}`);
  const pinned = goSumHash(readFileSync(join(setDir(set), "go.sum"), "utf8"), path, version);
  if (!pinned) throw new Error(`test/real/tools/${set}/go.sum has no hash for ${path} ${version}`);
  const escaped = escapeModulePath(path);
  const dir = join(cache, `${escaped}@${version}`);
  const ziphash = join(cache, "cache", "download", escaped, "@v", `${version}.ziphash`);
  if (!existsSync(dir) || !existsSync(ziphash)) {
    throw new Error(
      `${path}@${version} is not in the module cache ${cache}; fetch it with: ` +
        `(cd test/real/tools/${set} && go mod download ${path})`,
    );
  }
  const cached = readFileSync(ziphash, "utf8").trim();
  if (cached !== pinned) {
    throw new Error(`${path}@${version} in ${cache} hashes ${cached}, but go.sum pins ${pinned}`);
  }
  return { path, version, dir, read: (file) => readFileSync(join(dir, file), "utf8") };
}
