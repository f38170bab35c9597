/**
 * The subcommands of `applygate`: the product's own, and those the package declares in
 * package.json (`applygate.commands`) for a checkout only. The playground declares itself there,
 * so the product names no test file; a build that leaves a declared module out (the image has no
 * test/) answers that command with the line its declaration gives.
 */
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { z } from "zod";
import { ownPackage } from "../version.js";

export interface Command {
  summary: string;
  /**
   * What `import()` loads: a path relative to queue/cli/ (the product's own) or a file URL (a
   * declared one). The module exports `run(argv: string[]): Promise<number | undefined>`.
   */
  module: string;
  /** Set when a build may leave the module out: the one line said then. */
  absentFromBuild?: string;
}

export const BUILT_IN: Readonly<Record<string, Command>> = {
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
};

/**
 * package.json's `applygate` section. `commands`: name → what `--help` says of it, its module
 * (relative to package.json) and the line said when a build leaves that module out.
 */
const Section = z
  .object({
    commands: z
      .record(
        z.string().regex(/^[a-z][a-z-]*$/, "a command is named in lower case"),
        z
          .object({ summary: z.string().min(1), module: z.string().min(1), absent: z.string().min(1) })
          .strict(),
      )
      .optional(),
  })
  .optional();

/**
 * The commands package.json declares, their modules resolved against its folder. A declaration
 * that is malformed or takes a built-in name is the package's fault: it throws, naming it.
 */
export function declaredCommands(from?: string): Record<string, Command> {
  const pkg = ownPackage(from);
  if (!pkg) return {};
  const parsed = Section.safeParse(pkg.json.applygate);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`package.json applygate.${issue?.path.join(".")}: ${issue?.message}`);
  }
  const out: Record<string, Command> = {};
  for (const [name, d] of Object.entries(parsed.data?.commands ?? {})) {
    if (name in BUILT_IN) throw new Error(`package.json applygate.commands: "${name}" is a built-in command`);
    out[name] = {
      summary: d.summary,
      module: pathToFileURL(join(pkg.dir, d.module)).href,
      absentFromBuild: d.absent,
    };
  }
  return out;
}

/** Every command of this process: the built-in ones, then those its package.json declares. */
export function allCommands(from?: string): Record<string, Command> {
  return { ...BUILT_IN, ...declaredCommands(from) };
}
