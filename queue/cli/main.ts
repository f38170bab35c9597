/**
 * `applygate <command>`: one binary for every process. Each command lives in its component and
 * exports `run(argv)`; the modules are loaded by path so this launcher depends on none of them
 * (the commands: ./commands.ts).
 */
import { basename } from "node:path";
import { fileURLToPath } from "node:url";
import { ConfigError } from "../config.js";
import { Unreachable } from "../startup-check.js";
import { applygateVersion } from "../version.js";
import { allCommands, type Command } from "./commands.js";

/** How the person typed the command: `kubectl applygate` when kubectl ran this as its plugin. */
export function invokedAs(script = process.argv[1] ?? ""): string {
  return basename(script).replace(/\.m?js$/, "") === "kubectl-applygate" ? "kubectl applygate" : "applygate";
}

function usage(commands: Record<string, Command>): string {
  const lines = [`usage: ${invokedAs()} <command> [flags]`, "", "commands:"];
  for (const [name, c] of Object.entries(commands)) lines.push(`  ${name.padEnd(12)}${c.summary}`);
  lines.push(
    "",
    `Run \`${invokedAs()} <command> --help\` for a command's flags, \`${invokedAs()} --version\` for the version.`,
  );
  return lines.join("\n");
}

/** True when `err` says the command's own module is missing, not something that module imports. */
function isAbsent(err: unknown, command: Command): boolean {
  const e = err as { code?: string; url?: string; message?: string };
  const url = new URL(command.module, import.meta.url);
  return (
    e?.code === "ERR_MODULE_NOT_FOUND" &&
    (e.url === url.href || String(e.message).includes(`'${fileURLToPath(url)}'`))
  );
}

export async function main(
  argv: string[],
  commands: Record<string, Command> = allCommands(),
): Promise<number> {
  const [name, ...rest] = argv;
  // Every command answers it too (`applygate gateway --version`), before reading any setting.
  if (name === "--version" || name === "version" || rest.includes("--version")) {
    process.stdout.write(`${invokedAs()} ${applygateVersion()}\n`);
    return 0;
  }
  if (!name || name === "--help" || name === "-h" || name === "help") {
    process.stdout.write(`${usage(commands)}\n`);
    return name ? 0 : 2;
  }
  const command = commands[name];
  if (!command) {
    process.stderr.write(`applygate: unknown command "${name}"\n${usage(commands)}\n`);
    return 2;
  }
  let mod: { run(argv: string[]): Promise<number | undefined> };
  try {
    mod = await import(command.module);
  } catch (err) {
    if (command.absentFromBuild && isAbsent(err, command)) {
      process.stderr.write(`applygate ${name}: ${command.absentFromBuild}\n`);
      return 2;
    }
    throw err;
  }
  try {
    return (await mod.run(rest)) ?? 0;
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`applygate ${name}: ${err.message}\n`);
      return 2;
    }
    if (err instanceof Unreachable) {
      process.stderr.write(`applygate ${name}: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
}
