import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { BUILT_IN, declaredCommands } from "./commands.js";

const dir = mkdtempSync(join(tmpdir(), "applygate-cli-"));
const root = join(import.meta.dirname, "..", "..");
const ownJson = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));

/**
 * A package laid out as the image lays it out (package.json at its top, the launcher in
 * queue/cli/, no test/), with this `applygate` section in its package.json: the folder the
 * launcher would run from.
 */
function packageAt(name: string, section: unknown): string {
  const top = join(dir, name);
  mkdirSync(join(top, "queue", "cli"), { recursive: true });
  writeFileSync(
    join(top, "package.json"),
    JSON.stringify({ name: "applygate", version: "0.0.0-test", applygate: section }),
  );
  return join(top, "queue", "cli");
}

/** Runs `main(argv)` in a plain Node process (as the bin does), with the commands the package at `from` has. */
function cli(from: string, argv: string[]) {
  const commandsTs = pathToFileURL(join(import.meta.dirname, "commands.ts")).href;
  const mainTs = pathToFileURL(join(import.meta.dirname, "main.ts")).href;
  const script = `
    import { allCommands } from ${JSON.stringify(commandsTs)};
    import { main } from ${JSON.stringify(mainTs)};
    process.exitCode = await main(${JSON.stringify(argv)}, allCommands(${JSON.stringify(from)}));`;
  return spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
    encoding: "utf8",
    timeout: 30_000,
  });
}

describe("commands the package declares", () => {
  it("the product names no module under test/; the checkout's package.json adds the playground, whose module is here", () => {
    expect(Object.values(BUILT_IN).filter((c) => c.module.includes("test/"))).toEqual([]);
    expect(BUILT_IN).not.toHaveProperty("playground");
    const playground = declaredCommands(import.meta.dirname).playground;
    expect(playground?.module).toBe(pathToFileURL(join(root, "test", "playground", "main.js")).href);
    // In a checkout tsx loads main.js from its TypeScript source.
    expect(existsSync(fileURLToPath(playground!.module).replace(/\.js$/, ".ts"))).toBe(true);
  });

  it("a build without the module (the image: no test/) lists the playground, and running it says in one line that this build has none, exiting non-zero", () => {
    const image = packageAt("image", ownJson.applygate);
    const help = cli(image, ["--help"]);
    expect(help.status, help.stderr).toBe(0);
    expect(help.stdout).toMatch(/^ {2}playground {2}run everything on a laptop/m);
    const r = cli(image, ["playground"]);
    expect(r.status).toBe(2);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toMatch(/^applygate playground: the playground is not part of this build/);
  });

  it("a module the command imports that is missing is not mistaken for an absent command", () => {
    const from = packageAt("broken", {
      commands: { playground: { ...ownJson.applygate.commands.playground, module: "broken.mjs" } },
    });
    writeFileSync(
      join(dir, "broken", "broken.mjs"),
      'import "./missing-dependency.js";\nexport async function run() { return 0; }\n',
    );
    const r = cli(from, ["playground"]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain("ERR_MODULE_NOT_FOUND");
    expect(r.stderr).toContain("missing-dependency.js");
    expect(r.stderr).not.toContain("not part of this build");
  });

  it("a declaration that takes a built-in name, or lacks the line said without its module, is refused naming it", () => {
    const entry = { summary: "s", module: "x.js", absent: "not here" };
    expect(() => declaredCommands(packageAt("taken", { commands: { gateway: entry } }))).toThrow(
      /"gateway" is a built-in command/,
    );
    const { absent: _, ...lacking } = entry;
    expect(() => declaredCommands(packageAt("lacking", { commands: { extra: lacking } }))).toThrow(
      /applygate\.commands\.extra\.absent/,
    );
    expect(declaredCommands(packageAt("none", undefined))).toEqual({});
  });
});
