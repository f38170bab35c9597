/**
 * `npm run soak -- --runs N --seed S [--minutes M] [--actions K] [--replay SEED] [--log LEVEL]
 *  [--webhook] [--mirror] [--run-minutes R]`
 *
 * Plays seeded random runs over the whole assembly and checks the invariants after each. Run i
 * uses seed S + i, so `--replay <that seed>` plays a failing run again. Progress goes to stderr
 * as it runs; the last line on stdout is one JSON summary; the exit code is 0 only without a
 * violation. A run that has not ended after R minutes (default 5) is stopped and reported as a
 * violation ("finished") with what it was doing, its actions and its kept logs.
 */
import { parseArgs } from "node:util";
import { resolveEmbeddedRedis } from "../../queue/redis.js";
import { ensureRedisServer } from "../redis/install.js";
import { percentile } from "../support/percentile.js";
import { repairDelay } from "./invariants.js";
import { describeAction, describeRevert, playRun, type RunResult } from "./run.js";

const USAGE = `usage: npm run soak -- [--runs N] [--seed S] [--minutes M] [--actions K] [--replay SEED]
       [--log LEVEL] [--webhook] [--mirror] [--run-minutes R]
  --runs N         runs to play (default 10; unbounded with --minutes)
  --seed S         seed of the first run; run i plays S + i (default from the clock)
  --minutes M      stop starting runs after M minutes
  --actions K      actions per run (default 12)
  --replay SEED    play the one run of that seed again
  --log LEVEL      pass the components' logs through at LEVEL
  --webhook        the webhook applier beside Flux and Argo CD
  --mirror         the mirror: edits made through the API reach Git
  --run-minutes R  stop a run after R minutes as a violation (default 5)
The last line on stdout is a JSON summary; the exit code is 0 only without a violation.
`;

const parsed = (() => {
  try {
    return parseArgs({
      options: {
        help: { type: "boolean", short: "h", default: false },
        runs: { type: "string" },
        seed: { type: "string" },
        minutes: { type: "string" },
        actions: { type: "string", default: "12" },
        replay: { type: "string" },
        log: { type: "string" },
        webhook: { type: "boolean", default: false },
        mirror: { type: "boolean", default: false },
        "run-minutes": { type: "string" },
      },
    });
  } catch (err) {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n${USAGE}`);
    process.exit(2);
  }
})();
if (parsed.values.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}
const { values } = parsed;

const int = (name: string, v: string | undefined, fallback: number): number => {
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) {
    process.stderr.write(`--${name}: expected a whole number, got ${JSON.stringify(v)}\n`);
    process.exit(2);
  }
  return n;
};

const replay = values.replay === undefined ? undefined : int("replay", values.replay, 0);
const seed = replay ?? int("seed", values.seed, Date.now() % 1_000_000);
const minutes = values.minutes === undefined ? undefined : int("minutes", values.minutes, 0);
const runs =
  replay !== undefined ? 1 : int("runs", values.runs, minutes === undefined ? 10 : Number.MAX_SAFE_INTEGER);
const actions = int("actions", values.actions, 12);
const runMinutes =
  values["run-minutes"] === undefined ? undefined : int("run-minutes", values["run-minutes"], 5);
const deadline = minutes === undefined ? Number.POSITIVE_INFINITY : Date.now() + minutes * 60_000;

const say = (line: string) => process.stderr.write(`${line}\n`);
/** The longest time an older value stayed over an edit in a run (one never undone counts to the run's end). */
const longestRevert = (r: RunResult): number => Math.max(0, ...r.reverts.map((v) => v.lastedMs));

// A rejection nobody handled ends a product process in production: here it is the run's
// violation, with its stack (APPLYGATE_REDIS_CALL_STACKS=1 adds the caller's to a Redis error).
const unhandled: string[] = [];
process.on("unhandledRejection", (err) => {
  unhandled.push(err instanceof Error ? (err.stack ?? err.message) : String(err));
});

// Ctrl-C (or SIGTERM) ends the soak after the run under way: the summary of the runs so far is
// printed and its Redis stopped, where the default would leave a redis-server running.
let interrupted = false;
for (const signal of ["SIGINT", "SIGTERM"] as const)
  process.once(signal, () => {
    interrupted = true;
    say(`${signal}: stopping after the run under way`);
  });

const redis = await resolveEmbeddedRedis(process.env, { ensureServer: ensureRedisServer });
const results: RunResult[] = [];
try {
  for (let i = 0; i < runs && Date.now() < deadline && !interrupted; i++) {
    const runSeed = seed + i;
    const r = await playRun({
      seed: runSeed,
      redisUrl: redis.url,
      actions,
      webhook: values.webhook === true,
      mirror: values.mirror === true,
      ...(values.log ? { logLevel: values.log } : {}),
      ...(runMinutes ? { runTimeoutMs: runMinutes * 60_000 } : {}),
    });
    for (const stack of unhandled.splice(0)) r.violations.push({ invariant: "unhandled", detail: stack });
    results.push(r);
    const reverts = r.reverts.length
      ? `, ${r.reverts.length} revert(s), longest ${longestRevert(r)} ms (${
          r.reverts.filter((v) => v.residue).length
        } the design accepts)`
      : ", no revert";
    say(
      `run ${i + 1} seed ${runSeed}: ${r.actions.length} actions, ${r.seconds.toFixed(1)} s, ${
        r.violations.length ? `${r.violations.length} VIOLATION(S)` : "clean"
      }${reverts}`,
    );
    for (const v of r.reverts) say(`  revert ${describeRevert(v, r.startedAt)}`);
    if (r.violations.length || replay !== undefined) {
      say("  actions:");
      for (const a of r.actions) say(`    ${describeAction(a)}`);
      say("  violations:");
      for (const v of r.violations) say(`    ${v.invariant}: ${v.detail}`);
      say("  timeline:");
      for (const line of r.timeline) say(`    ${line}`);
      if (r.logs.length) {
        say("  debug logs:");
        for (const line of r.logs) process.stderr.write(`    ${line}`);
      }
      say(
        `  replay: npm run soak -- --replay ${runSeed} --actions ${actions}${values.webhook ? " --webhook" : ""}${values.mirror ? " --mirror" : ""}`,
      );
    }
  }
} finally {
  await redis.stop();
}

const seconds = results.map((r) => r.seconds).sort((a, b) => a - b);
const spreadOf = (xs: number[]) =>
  xs.length
    ? { n: xs.length, p50: percentile(xs, 50), p99: percentile(xs, 99), max: Math.max(...xs) }
    : { n: 0 };
const allReverts = results.flatMap((r) => r.reverts);
const repairs = allReverts.flatMap((v) => {
  const d = repairDelay(v);
  return d ? [d] : [];
});
const summary = {
  runs: results.length,
  seed,
  violations: results.flatMap((r, run) =>
    r.violations.map((v) => ({ seed: r.seed, run: run + 1, invariant: v.invariant, detail: v.detail })),
  ),
  reverts: results.reduce((n, r) => n + r.reverts.length, 0),
  revertsAccepted: results.reduce((n, r) => n + r.reverts.filter((v) => v.residue).length, 0),
  longestRevertMs: Math.max(0, ...results.map(longestRevert)),
  runsWithReverts: results.filter((r) => r.reverts.length > 0).length,
  // How long the older value stayed, and how soon after the overwriting operation's end the next
  // operation (the Repair) was sent and started: docs/design/decisions.md, "The revert the design accepts".
  revertMs: spreadOf(allReverts.map((v) => v.lastedMs)),
  repairSentMs: spreadOf(repairs.map((d) => d.sentMs)),
  repairRunningMs: spreadOf(repairs.flatMap((d) => (d.runningMs !== undefined ? [d.runningMs] : []))),
  revertsPerRun: results.map((r) => ({
    seed: r.seed,
    reverts: r.reverts.length,
    longestRevertMs: longestRevert(r),
  })),
  medianRunSeconds: seconds.length
    ? Number((seconds[Math.floor(seconds.length / 2)] as number).toFixed(1))
    : 0,
};
process.stdout.write(`${JSON.stringify(summary)}\n`);
process.exit(summary.violations.length ? 1 : 0);
