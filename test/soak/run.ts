/**
 * One soak run: a fresh assembly (its own Redis prefix, Git server and simulated cluster), the
 * planned actions played with their pauses, a bounded wait for quiescence, then the record the
 * invariants judge — read from the cluster's watch, the branch's history and the queues.
 */
import { join } from "node:path";
import pino from "pino";
import { TERMINAL_PHASES } from "../../queue/contract.js";
import { createLogger, type Logger } from "../../queue/log.js";
import { gitOk } from "../git/cli.js";
import { GitPeer } from "../git/peer.js";
import { apiEdit, clusterValue, gitValue, settled, tip, watchValue } from "../playground/actors.js";
import { type AssemblyTimers, FAST_TIMERS, startAssembly } from "../playground/assembly.js";
import { DEMO_REPO, type DemoApp, demoConfigMap, demoConfigPath } from "../playground/demo.js";
import { observeProgress } from "../playground/progress.js";
import { until } from "../support/wait.js";
import { checkRun, type Revert, type RunRecord, type Violation } from "./invariants.js";
import { type Action, APPS, describeAction, planRun } from "./plan.js";
import { seeded } from "./random.js";

export interface RunOptions {
  seed: number;
  redisUrl: string;
  actions?: number;
  /** Play these actions instead of the seed's plan (a scripted run). */
  plan?: Action[];
  /** Timers instead of the seed's. */
  timers?: AssemblyTimers;
  /** Print the assembly's logs at this level instead of keeping them for a failure. */
  logLevel?: string;
  /** Play the run with no claims, so nothing holds the appliers (their own timers apply): a broken assembly. */
  unheld?: boolean;
}

export interface RunResult {
  seed: number;
  actions: Action[];
  violations: Violation[];
  reverts: Revert[];
  seconds: number;
  /** For a failing run: the timeline of values and the kept debug logs. */
  timeline: string[];
  logs: string[];
}

/** Timers drawn from the seed: slow Flux builds and Argo CD syncs in some runs, quick in others. */
function timersFor(seed: number): AssemblyTimers {
  const r = seeded(seed ^ 0x5eed);
  const slow = r.chance(0.5);
  return {
    ...FAST_TIMERS,
    flux: { perObjectApplyMs: 1, ...(slow ? { buildMs: r.int(300, 1500) } : {}) },
    argo: { refreshIntervalMs: 3_600_000, ...(slow ? { syncDelayMs: r.int(300, 1500) } : {}) },
  };
}

export async function playRun(o: RunOptions): Promise<RunResult> {
  const t0 = Date.now();
  const actions = o.plan ?? planRun(o.seed, { actions: o.actions ?? 12 });
  const logs: string[] = [];
  const log: Logger = o.logLevel
    ? createLogger({ level: o.logLevel })
    : pino(
        { level: "debug", timestamp: pino.stdTimeFunctions.isoTime },
        {
          write(line: string) {
            logs.push(line);
            if (logs.length > 5_000) logs.splice(0, logs.length - 5_000);
          },
        },
      );
  const a = await startAssembly({
    redisUrl: o.redisUrl,
    log,
    timers: o.timers ?? timersFor(o.seed),
    withoutClaims: o.unheld ?? false,
  });
  const progress = await observeProgress({ redisUrl: o.redisUrl, prefix: a.prefix, repeats: true });
  const stopWatches: Array<() => void> = [];
  try {
    const start = o.unheld ? await tip(a) : await settled(a);
    if (o.unheld) {
      for (const app of APPS)
        await until(
          async () => (await gitValue(a, app)) === (await clusterValue(a, app)).greeting,
          `${app} to converge`,
          // Unheld, the applier creates the object on its own first interval: until then it is absent.
          { timeoutMs: 30_000, everyMs: 50, retryErrors: true },
        );
    }
    const record: RunRecord = {
      startValues: { flux: await gitValue(a, "flux"), argocd: await gitValue(a, "argocd") },
      edits: [],
      pushes: [],
      cluster: { flux: [], argocd: [] },
      commits: [],
      final: { cluster: { flux: undefined, argocd: undefined }, git: { flux: undefined, argocd: undefined } },
      operations: [],
    };
    for (const app of APPS) stopWatches.push(await watchValue(a.kubeConfig, app, record.cluster[app]));
    const attemptsBefore = progress.attempts().length;

    const pending: Array<Promise<void>> = [];
    for (const action of actions) {
      if (action.gapMs) await new Promise((r) => setTimeout(r, action.gapMs));
      pending.push(play(a, action, record));
      // Restarts and pushes take their time; edits overlap whatever follows.
      if (action.kind === "restart" || action.kind === "push") await pending[pending.length - 1];
    }
    await Promise.all(pending);

    // Quiescence: every attempt ended, the cluster holds Git's value for both apps, and nothing
    // (tip, attempts, reports) moved for QUIET_MS — an attempt decided a moment later counts too.
    let still = { since: Date.now(), state: "" };
    await until(
      async () => {
        const ended = new Set(
          progress
            .phases()
            .filter((p) => TERMINAL.has(p.phase))
            .map((p) => p.token),
        );
        const open = o.unheld ? 0 : progress.attempts().filter((at) => !ended.has(at.token)).length;
        const differ: string[] = [];
        for (const app of APPS)
          if ((await gitValue(a, app)) !== (await clusterValue(a, app)).greeting) differ.push(app);
        const state = `${await tip(a)} ${progress.events.length} ${open} ${differ}`;
        if (state !== still.state) still = { since: Date.now(), state };
        return open === 0 && differ.length === 0 && Date.now() - still.since >= QUIET_MS;
      },
      "quiescence",
      { timeoutMs: 90_000, everyMs: 200, retryErrors: true },
    ).catch(() => false);
    for (const stop of stopWatches.splice(0)) stop();

    record.commits = await commitsAfter(a, start);
    for (const app of APPS) {
      record.final.cluster[app] = (await clusterValue(a, app)).greeting;
      record.final.git[app] = await gitValue(a, app);
    }
    await progress.stop();
    const attempts = progress.attempts().slice(attemptsBefore);
    record.operations = attempts.map((at) => ({
      token: at.token,
      app: at.applier.kind === "flux" ? "flux" : "argocd",
      commit: at.commit,
      sentAt: Date.parse(at.sentAt),
      reasons: [...new Set(at.targets.map((t) => t.reason))],
      phases: progress
        .phases()
        .filter((p) => p.token === at.token)
        .map((p) => ({ phase: p.phase, at: Date.parse(p.at) })),
    }));
    const { violations, reverts } = checkRun(record);
    return {
      seed: o.seed,
      actions,
      violations,
      reverts,
      seconds: (Date.now() - t0) / 1000,
      timeline: timeline(record, t0),
      logs: violations.length ? logs : [],
    };
  } finally {
    for (const stop of stopWatches) stop();
    await progress.stop().catch(() => {});
    await a.stop();
  }
}

type Assembly = Awaited<ReturnType<typeof startAssembly>>;

const TERMINAL = new Set<string>(TERMINAL_PHASES);
/** How long nothing may move before a run counts as quiet. */
const QUIET_MS = 3_000;

async function play(a: Assembly, action: Action, record: RunRecord): Promise<void> {
  switch (action.kind) {
    case "edit":
      return edit(a, action.app, action.value, action.save, record);
    case "burst":
      // Edits of one app within one second: each starts 0–300 ms after the one before.
      await Promise.all(
        action.values.map(async (value, i) => {
          await new Promise((r) => setTimeout(r, i * (100 + (value.length % 3) * 100)));
          await edit(a, action.app, value, true, record);
        }),
      );
      return;
    case "push": {
      const peer = await GitPeer.clone(a.demo.repoUrl, a.demo.branch);
      try {
        const { objectYaml } = await import("../../queue/git/layout.js");
        const subject = `greeting ${action.value} (pushed to Git)`;
        const commit = await peer.commitAndPush(
          demoConfigPath(action.app),
          objectYaml(demoConfigMap(action.app, { greeting: action.value })),
          subject,
        );
        record.pushes.push({ app: action.app, value: action.value, at: Date.now(), commit, subject });
      } finally {
        await peer.remove();
      }
      return;
    }
    case "restart":
      if (action.process === "worker") {
        await a.stopWorker();
        await a.startWorker();
      } else {
        await a.stopSidecar(action.process);
        await a.startSidecar(action.process);
      }
      return;
  }
}

async function edit(
  a: Assembly,
  app: DemoApp,
  value: string,
  save: boolean,
  record: RunRecord,
): Promise<void> {
  const at = Date.now();
  const answer = await apiEdit(a, app, value, { wait: false, save });
  record.edits.push({
    app,
    value,
    at,
    save,
    status: answer.status,
    message: `${app}: set greeting to ${value}`,
  });
}

/** The branch's commits after `start`, first parent first, with each app's greeting at that commit. */
async function commitsAfter(a: Assembly, start: string): Promise<RunRecord["commits"]> {
  const gitDir = join(a.git.root, `${DEMO_REPO}.git`);
  const out = await gitOk([
    "--git-dir",
    gitDir,
    "log",
    "--first-parent",
    "--reverse",
    "--format=%H %s",
    `${start}..${a.demo.branch}`,
  ]);
  const commits: RunRecord["commits"] = [];
  for (const line of out.split("\n").filter(Boolean)) {
    const sha = line.slice(0, 40);
    const values = { flux: undefined, argocd: undefined } as Record<DemoApp, string | undefined>;
    for (const app of APPS) {
      const text = await gitOk(["--git-dir", gitDir, "show", `${sha}:${demoConfigPath(app)}`]).catch(
        () => "",
      );
      values[app] = /greeting: (.*)/.exec(text)?.[1]?.trim();
    }
    commits.push({ sha, subject: line.slice(41), values });
  }
  return commits;
}

/** The run as a person reads it: actions, values the cluster took, commits. */
function timeline(r: RunRecord, t0: number): string[] {
  const ms = (t: number) => `${String(t - t0).padStart(6)} ms`;
  return [
    ...r.edits.map((e) => ({
      t: e.at,
      line: `${ms(e.at)}  edit ${e.app} = ${e.value}${e.save ? " (save)" : ""} → ${e.status}`,
    })),
    ...r.pushes.map((p) => ({
      t: p.at,
      line: `${ms(p.at)}  push ${p.app} = ${p.value} (${p.commit.slice(0, 8)})`,
    })),
    ...APPS.flatMap((app) =>
      r.cluster[app].map((s) => ({
        t: s.at,
        line: `${ms(s.at)}  cluster ${app} = ${s.value} (by ${s.manager ?? "?"})`,
      })),
    ),
    ...r.operations.map((o) => ({
      t: o.sentAt,
      line: `${ms(o.sentAt)}  ${o.app} ${o.token} sent for ${o.commit.slice(0, 8)} (${o.reasons.join(", ")})`,
    })),
    ...r.operations.flatMap((o) =>
      o.phases.map((p) => ({
        t: p.at,
        line: `${ms(p.at)}  ${o.app} ${o.token} ${p.phase} (${o.commit.slice(0, 8)})`,
      })),
    ),
  ]
    .sort((x, y) => x.t - y.t)
    .map((x) => x.line)
    .concat(
      r.commits.map(
        (c) => `commit ${c.sha.slice(0, 8)} ${c.subject}  [flux=${c.values.flux} argocd=${c.values.argocd}]`,
      ),
    );
}

export { describeAction };
