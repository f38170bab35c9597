/**
 * What `npm install` leaves a newcomer with: no "install scripts not covered by allowScripts"
 * warning (npm 11 skips a dependency's install script unless package.json's allowScripts
 * approves it), and msgpackr (BullMQ's encoder) running on its native extractor.
 *
 * The lock file is the fact checked, not `npm install-scripts ls`: that command's answer depends
 * on how node_modules was laid out (a symlinked node_modules makes every package a link, whose
 * `prepare` scripts it then lists too), while what a fresh `npm ci` warns about is exactly the
 * lock's packages marked `hasInstallScript`.
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
  allowScripts?: Record<string, boolean>;
};
const lock = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8")) as {
  packages: Record<string, { version?: string; hasInstallScript?: boolean }>;
};

/** Packages whose install scripts npm runs (or skips with the warning), as name@version. */
const withInstallScripts = Object.entries(lock.packages)
  .filter(([path, p]) => path !== "" && p.hasInstallScript)
  .map(([path, p]) => ({ name: path.slice(path.lastIndexOf("node_modules/") + 13), version: p.version }));

/** The allowScripts entry deciding a package: a pinned `name@version` first, then the name alone. */
function decision(name: string, version: string | undefined): boolean | undefined {
  const allow = pkg.allowScripts ?? {};
  return allow[`${name}@${version}`] ?? allow[name];
}

describe("a fresh install", () => {
  it("finds the packages with install scripts in the lock (the check below has something to check)", () => {
    expect(withInstallScripts.map((p) => p.name)).toContain("msgpackr-extract");
  });

  it("decides every dependency's install script in package.json, so npm warns of none", () => {
    const undecided = withInstallScripts.filter((p) => decision(p.name, p.version) === undefined);
    expect(undecided).toEqual([]);
  });

  it("lets msgpackr-extract build, and msgpackr runs on its native extractor", async () => {
    expect(decision("msgpackr-extract", lock.packages["node_modules/msgpackr-extract"]?.version)).toBe(true);
    const msgpackr = await import("msgpackr");
    expect(msgpackr.isNativeAccelerationEnabled).toBe(true);
  });
});
