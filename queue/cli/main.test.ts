import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";

const dir = mkdtempSync(join(tmpdir(), "applygate-cli-"));
const mainTs = pathToFileURL(join(import.meta.dirname, "main.ts")).href;

/** Runs `main(["playground"])` in a plain Node process (as the bin does), its module at `module`. */
function playgroundAt(module: string) {
  const script = `
    import { COMMANDS, main } from ${JSON.stringify(mainTs)};
    const playground = { ...COMMANDS.playground, module: ${JSON.stringify(module)} };
    process.exitCode = await main(["playground"], { playground });`;
  return spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
    encoding: "utf8",
    timeout: 30_000,
  });
}

describe("a command a build leaves out", () => {
  it("the playground says in one line that this build has none, and exits non-zero", () => {
    const r = playgroundAt(pathToFileURL(join(dir, "no-playground.js")).href);
    expect(r.status).toBe(2);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toMatch(/^applygate playground: the playground is not part of this build/);
  });

  it("a module the command imports that is missing is not mistaken for an absent command", () => {
    const file = join(dir, "broken.mjs");
    writeFileSync(file, 'import "./missing-dependency.js";\nexport async function run() { return 0; }\n');
    const r = playgroundAt(pathToFileURL(file).href);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain("ERR_MODULE_NOT_FOUND");
    expect(r.stderr).toContain("missing-dependency.js");
    expect(r.stderr).not.toContain("not part of this build");
  });
});
