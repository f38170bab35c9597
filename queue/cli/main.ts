/**
 * `applygate <command>`: one binary for every process. Each command lives in its component and
 * exports `run(argv)`; the modules are loaded by path so this launcher depends on none of them.
 */
import { basename } from "node:path";
import { fileURLToPath } from "node:url";
import { ConfigError } from "../config.js";
import { Unreachable } from "../startup-check.js";
import { applygateVersion } from "../version.js";

export interface Command {
  summary: string;
  /** Module path relative to this file; it exports `run(argv: string[]): Promise<number | undefined>`. */
  module: string;
  /** Set when a build may leave the module out (the image has no test/): the one line said then. */
  absentFromBuild?: string;
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
  mirror: {
    summary: "mirror the API edits WatchRules select into Git (the watch plane)",
    module: "../../sidecar/mirror/main.js",
  },
  status: {
    summary: "why an apply is or is not happening, per GitTarget and claim (-n, -A, -o json, -w)",
    module: "./status.js",
  },
  reconcile: {
    summary: "ask the branch worker for an apply of a claim now, through the same rules",
    module: "./reconcile.js",
  },
  suspend: {
    summary: "set spec.suspend on a GitTarget: no publication and no apply until resumed",
    module: "./suspend.js",
  },
  resume: {
    summary: "clear spec.suspend on a GitTarget",
    module: "./resume.js",
  },
  playground: {
    summary: "run everything on a laptop against a simulated cluster (embedded defaults)",
    module: "../../test/playground/main.js",
    absentFromBuild:
      "the playground is not part of this build (the image leaves test/ out); run it from a checkout with `npm start`",
  },
};

/** How the person typed the command: `kubectl applygate` when kubectl ran this as its plugin. */
export function invokedAs(script = process.argv[1] ?? ""): string {
  return basename(script).replace(/\.m?js$/, "") === "kubectl-applygate" ? "kubectl applygate" : "applygate";
}

function usage(): string {
  const lines = [`usage: ${invokedAs()} <command> [flags]`, "", "commands:"];
  for (const [name, c] of Object.entries(COMMANDS)) lines.push(`  ${name.padEnd(12)}${c.summary}`);
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

export async function main(argv: string[], commands: Record<string, Command> = COMMANDS): Promise<number> {
  const [name, ...rest] = argv;
  // Every command answers it too (`applygate gateway --version`), before reading any setting.
  if (name === "--version" || name === "version" || rest.includes("--version")) {
    process.stdout.write(`${invokedAs()} ${applygateVersion()}\n`);
    return 0;
  }
  if (!name || name === "--help" || name === "-h" || name === "help") {
    process.stdout.write(`${usage()}\n`);
    return name ? 0 : 2;
  }
  const command = commands[name];
  if (!command) {
    process.stderr.write(`applygate: unknown command "${name}"\n${usage()}\n`);
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
