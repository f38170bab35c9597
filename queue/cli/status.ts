/**
 * `applygate status [GITTARGET]` (and `kubectl applygate status`): why an apply is or is not
 * happening, per GitTarget and the claim it names. Reads the API server with the kubeconfig's
 * identity (a namespace viewer may run it) and, given a Redis URL, the branch workers' decisions,
 * explained by the decision core itself. `-w` prints again whenever something changed.
 */
import type { Redis } from "ioredis";
import { ConfigError } from "../config.js";
import { errorMessage } from "../errors.js";
import { Kube } from "../kube/index.js";
import { KUBE_HELP, KUBE_OPTIONS, kubeTarget, parseFlags, redisTarget } from "./kube-flags.js";
import { statusReport, type TargetStatus } from "./status-model.js";
import { cliRedis, readCluster, readDecisionsView } from "./status-read.js";
import { type OutputFormat, render, table, tableRows } from "./status-render.js";

const OPTIONS = {
  ...KUBE_OPTIONS,
  output: { type: "string", short: "o" },
  watch: { type: "boolean", short: "w" },
  interval: { type: "string" },
} as const;

export const STATUS_HELP = [
  "usage: applygate status [GITTARGET] [flags]",
  "",
  "Why an apply is or is not happening: per GitTarget, its branch and folder, the pending writes,",
  "the reasons pending for its applier and why that applier gets no attempt now, the last",
  "operations and the depth of the branch's queue. Name a GitTarget for everything about it.",
  "",
  "flags:",
  "  -o, --output <format>    table (default), wide, json or yaml",
  "  -w, --watch              print again whenever something changed (Ctrl-C stops)",
  "      --interval <secs>    how often --watch reads (default 2)",
  ...KUBE_HELP,
].join("\n");

export interface CommandIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  env: NodeJS.ProcessEnv;
  /** Ends a watch. */
  signal?: AbortSignal;
  now?: () => number;
}

export const processIo = (): CommandIo => ({
  stdout: (t) => process.stdout.write(t),
  stderr: (t) => process.stderr.write(t),
  env: process.env,
});

const FORMATS: OutputFormat[] = ["table", "wide", "json", "yaml"];

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

/** What a watch compares: the report of one GitTarget without its ages, which change at every read. */
export function changeKey(t: TargetStatus): string {
  const { why: _why, operations, ...rest } = t;
  return JSON.stringify({ ...rest, operations: operations.map(({ ageSeconds: _age, ...o }) => o) });
}

export async function run(argv: string[], io: CommandIo = processIo()): Promise<number> {
  const { values, positionals } = parseFlags(argv, OPTIONS);
  if (values.help) {
    io.stdout(`${STATUS_HELP}\n`);
    return 0;
  }
  const format = (values.output ?? "table") as OutputFormat;
  if (!FORMATS.includes(format))
    throw new ConfigError(
      `invalid setting --output: expected one of ${FORMATS.join(", ")}, got "${values.output}"`,
    );
  if (positionals.length > 1)
    throw new ConfigError(`expected at most one GitTarget name, got ${positionals.length}`);
  const named = positionals[0];
  if (named && values["all-namespaces"]) throw new ConfigError("a GitTarget name cannot be given with -A");
  const interval = values.interval === undefined ? 2 : Number(values.interval);
  if (!(interval > 0))
    throw new ConfigError(`invalid setting --interval: expected seconds > 0, got "${values.interval}"`);
  const target = kubeTarget(values);
  const redisAt = redisTarget(values, io.env);
  const kube = new Kube(target.kc);
  const redis: Redis | undefined = redisAt.url ? cliRedis(redisAt.url) : undefined;
  const now = io.now ?? Date.now;
  const unread = "no Redis URL given (--redis-url or REDIS_URL): the cluster's view only";

  const once = async () => {
    const cluster = await readCluster(kube, target.scope);
    if (named) cluster.targets = cluster.targets.filter((t) => t.metadata.name === named);
    const uids = new Set(cluster.targets.flatMap((t) => (t.metadata.uid ? [t.metadata.uid] : [])));
    const decisions = await readDecisionsView(redis, redisAt.prefix, uids, unread);
    return statusReport(cluster, decisions, now());
  };

  try {
    let report: Awaited<ReturnType<typeof once>>;
    try {
      report = await once();
    } catch (err) {
      io.stderr(`applygate status: ${errorMessage(err)}\n`);
      return 1;
    }
    if (named && report.targets.length === 0) {
      io.stderr(`applygate status: GitTarget "${named}" not found in namespace ${target.namespace}\n`);
      return 1;
    }
    io.stdout(`${render(report, format, !!named)}\n`);
    if (!values.watch) return 0;

    // Watching: a table prints only the rows that changed (as kubectl get -w); other formats
    // print the whole report again. A change is a change of what the report says, not of an age.
    let last = new Map(report.targets.map((t) => [`${t.namespace}/${t.name}`, changeKey(t)]));
    while (!io.signal?.aborted) {
      await sleep(interval * 1000, io.signal);
      if (io.signal?.aborted) break;
      try {
        report = await once();
      } catch (err) {
        io.stderr(`applygate status: ${errorMessage(err)}\n`);
        continue;
      }
      const keys = new Map(report.targets.map((t) => [`${t.namespace}/${t.name}`, changeKey(t)]));
      const changed = report.targets.filter(
        (t) => last.get(`${t.namespace}/${t.name}`) !== keys.get(`${t.namespace}/${t.name}`),
      );
      const gone = [...last.keys()].some((k) => !keys.has(k));
      last = keys;
      if (changed.length === 0 && !gone) continue;
      if ((format === "table" || format === "wide") && !named) {
        if (changed.length === 0) continue;
        // Rows padded as under the first header, which is not printed again.
        const rows = tableRows({ ...report, targets: changed }, format === "wide");
        io.stdout(`${table(rows).split("\n").slice(1).join("\n")}\n`);
      } else {
        const text = render(report, format, !!named);
        io.stdout(`${format === "yaml" ? "---\n" : format === "json" ? "" : "\n"}${text}\n`);
      }
    }
    return 0;
  } finally {
    redis?.disconnect();
  }
}
