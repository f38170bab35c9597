/**
 * `applygate <command>`: one binary for every process. Each command lives in its component and
 * exports `run(argv)`; the modules are loaded by path so this launcher depends on none of them.
 */
import { ConfigError } from "../config.js";

export interface Command {
  summary: string;
  /** Module path relative to this file; it exports `run(argv: string[]): Promise<number | undefined>`. */
  module: string;
}

export const COMMANDS: Record<string, Command> = {
  gateway: {
    summary: "receive Git webhooks and intake writes, queue them, serve the dashboard",
    module: "../../gateway/main.js",
  },
  worker: {
    summary: "run branch workers: publish pending writes, decide and send applies",
    module: "../worker-main.js",
  },
  sidecar: {
    summary: "execute and follow apply operations beside Flux or Argo CD",
    module: "../../sidecar/main.js",
  },
  playground: {
    summary: "run everything on a laptop against a simulated cluster (embedded defaults)",
    module: "../../test/playground/main.js",
  },
};

function usage(): string {
  const lines = ["usage: applygate <command> [flags]", "", "commands:"];
  for (const [name, c] of Object.entries(COMMANDS)) lines.push(`  ${name.padEnd(12)}${c.summary}`);
  lines.push("", "Run `applygate <command> --help` for a command's flags.");
  return lines.join("\n");
}

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === "--help" || name === "-h" || name === "help") {
    process.stdout.write(`${usage()}\n`);
    return name ? 0 : 2;
  }
  const command = COMMANDS[name];
  if (!command) {
    process.stderr.write(`applygate: unknown command "${name}"\n${usage()}\n`);
    return 2;
  }
  try {
    const mod = (await import(command.module)) as { run(argv: string[]): Promise<number | undefined> };
    return (await mod.run(rest)) ?? 0;
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`applygate ${name}: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
}
