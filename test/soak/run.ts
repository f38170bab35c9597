/**
 * One soak run: a fresh assembly (its own Redis prefix, Git server and simulated cluster), the
 * planned actions played with their pauses, a bounded wait for quiescence, then the record the
 * invariants judge — read from the cluster's watch, the branch's history and the queues.
 */
import { join } from "node:path";
import * as k8s from "@kubernetes/client-node";
import pino from "pino";
import { TERMINAL_PHASES } from "../../queue/contract.js";
import { notDueBecause } from "../../queue/decide/due.js";
import { type DecisionState, hasPending, kindsPending } from "../../queue/decide/index.js";
import { branchKeys, writePublishedKey } from "../../queue/keys.js";
import { createLogger, type Logger } from "../../queue/log.js";
import { connectRedis } from "../../queue/redis.js";
import { WRITE_TRAILER } from "../../queue/worker/commit-content.js";
import { Mirror } from "../../sidecar/mirror/mirror.js";
import { gitOk } from "../git/cli.js";
import { GitPeer } from "../git/peer.js";
import {
  clusterValue,
  gitValue,
  postWrite,
  readClaim,
  settled,
  tip,
  USER_MANAGER,
  watchValue,
} from "../playground/actors.js";
import { type AssemblyTimers, FAST_TIMERS, startAssembly } from "../playground/assembly.js";
import {
  DEMO_APPS,
  DEMO_NAMESPACE,
  DEMO_REPO,
  DEMO_WEBHOOK_APP,
  type DemoApp,
  demoConfigMap,
  demoConfigPath,
  demoWebhookConfigMap,
  demoWebhookConfigPath,
  INTAKE_TOKEN,
} from "../playground/demo.js";
import { observeProgress } from "../playground/progress.js";
import { type RestartableRedis, restartableRedis } from "../redis/restartable.js";
import { until } from "../support/wait.js";
import { checkRun, type HandedWrite, type Revert, type RunRecord, type Violation } from "./invariants.js";
import { type Action, APPS, describeAction, needs, planRun } from "./plan.js";
import { type Processes, startProcesses } from "./processes.js";
import { type Look, openAttempts, waitQuiet, whyNotQuiet } from "./quiescence.js";
import { seeded } from "./random.js";
import { type Report, reporter } from "./reporter.js";

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
  /**
   * A broken assembly: the worker's flush answers "published" at the current tip without
   * publishing anything, and it never publishes by itself.
   */
  flushSkipsPublication?: boolean;
  /** How long to wait for quiescence before judging the run as it stands (default 90 s). */
  quiesceTimeoutMs?: number;
  /** Draw pushes of the webhook applier's folder too (`--webhook`; another plan for the same seed). */
  webhook?: boolean;
  /**
   * The watch plane is the only reporter of edits (`--mirror`; another plan for the same seed):
   * the assembly runs the mirror, the actors edit the cluster only, and the record's writes are
   * the mirror's handed ones.
   */
  mirror?: boolean;
  /**
   * How long the whole run may take before it is stopped and reported as a violation with what
   * it was doing, its actions and its kept logs (default RUN_TIMEOUT_MS): a hang is a finding.
   */
  runTimeoutMs?: number;
}

/** How long a `--mirror` run's assembly may take to settle (the mirror's barrier included). */
const SETTLE_MIRROR_MS = 90_000;

/** A run's bound: its actions take seconds, the quiescence wait at most 90 s. */
export const RUN_TIMEOUT_MS = 5 * 60_000;

/** What a run shares with its bound: enough to report it and clean up if it never ends. */
interface RunContext {
  logs: string[];
  actions: Action[];
  /** What the run is doing now (the action it plays, or the stage it is in). */
  at: string;
  record?: RunRecord;
  /** Stops whatever the run started; safe to call more than once. */
  cleanup?: () => Promise<void>;
  /** Set once the run's bound passed: a body that goes on stops at its next action. */
  abandoned?: boolean;
  /** What the claims and the branch's decision state hold now, for a run that failed (lines). */
  inspect?: () => Promise<string[]>;
  /** What `inspect` read when the body threw, before its cleanup. */
  state?: string[];
}

export interface RunResult {
  seed: number;
  actions: Action[];
  violations: Violation[];
  reverts: Revert[];
  seconds: number;
  /** When the run started (ms since the epoch): the timeline's zero. */
  startedAt: number;
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

/**
 * Plays one run within its bound. A run that has not ended by then (an action or a stop that
 * never finishes) is judged as it stands: one violation ("finished") naming what it was doing,
 * with its actions, its timeline so far and its kept logs; what it started is stopped.
 */
export async function playRun(o: RunOptions): Promise<RunResult> {
  const t0 = Date.now();
  const boundMs = o.runTimeoutMs ?? RUN_TIMEOUT_MS;
  const ctx: RunContext = { logs: [], actions: [], at: "starting its assembly" };
  const body = playRunBody(o, ctx, t0);
  let timer: NodeJS.Timeout | undefined;
  // A run that throws (its assembly never converged at the start, say) is judged like one that
  // did not finish, with its logs, instead of ending the whole soak.
  let failed: Error | undefined;
  const ended = await Promise.race([
    body.catch((err: unknown) => {
      failed = err instanceof Error ? err : new Error(String(err));
      return undefined;
    }),
    new Promise<undefined>((r) => {
      timer = setTimeout(() => r(undefined), boundMs);
    }),
  ]).finally(() => clearTimeout(timer));
  if (ended) return ended;
  // A body that threw read the state before its cleanup; one still going is read now, before this one's.
  const state = failed ? ctx.state : await readState(ctx);
  ctx.abandoned = true;
  for (const line of state ?? []) keep(ctx.logs, `state: ${line}\n`);
  const minutes = Number((boundMs / 60_000).toFixed(2));
  const result: RunResult = {
    seed: o.seed,
    actions: ctx.actions,
    violations: [
      {
        invariant: "finished",
        detail: failed
          ? `the run failed while it was ${ctx.at}: ${failed.message}`
          : `the run did not finish in ${minutes} minute(s); it was ${ctx.at}`,
      },
    ],
    reverts: [],
    seconds: (Date.now() - t0) / 1000,
    startedAt: t0,
    timeline: ctx.record ? timeline(ctx.record, t0) : [],
    logs: [...ctx.logs],
  };
  // Children are SIGKILLed first, so a stop stuck on one cannot hold the cleanup; bounded anyway.
  let cleanupTimer: NodeJS.Timeout | undefined;
  await Promise.race([
    ctx.cleanup?.().catch(() => {}),
    new Promise<void>((r) => {
      cleanupTimer = setTimeout(r, 30_000);
    }),
  ]).finally(() => clearTimeout(cleanupTimer));
  return result;
}

async function playRunBody(o: RunOptions, ctx: RunContext, t0: number): Promise<RunResult> {
  const actions =
    o.plan ??
    planRun(o.seed, {
      actions: o.actions ?? 12,
      webhook: o.webhook ?? false,
      ...(o.mirror ? { mirror: true } : {}),
    });
  const viaMirror = o.mirror === true;
  const withHook = o.webhook === true || actions.some((x) => x.kind === "hook");
  ctx.actions = actions;
  const logs = ctx.logs;
  const log: Logger = o.logLevel
    ? createLogger({ level: o.logLevel })
    : pino(
        { level: "debug", timestamp: pino.stdTimeFunctions.isoTime },
        {
          write(line: string) {
            keep(logs, line);
          },
        },
      );
  const need = needs(actions);
  // A plan that restarts Redis runs on a private redis-server it can stop; others share the given one.
  const redis: RestartableRedis | undefined = need.privateRedis ? await restartableRedis() : undefined;
  const redisUrl = redis?.url ?? o.redisUrl;
  const timers = o.timers ?? timersFor(o.seed);
  const a = await startAssembly({
    redisUrl,
    log,
    timers: o.flushSkipsPublication
      ? { ...timers, branch: { ...timers.branch, autoPublish: false } }
      : timers,
    withoutClaims: o.unheld ?? false,
    ...(viaMirror ? { withMirror: true } : {}),
    ...(o.flushSkipsPublication ? { flushSkipsPublication: true } : {}),
  }).catch(async (err) => {
    await redis?.remove();
    throw err;
  });
  ctx.inspect = () => inspectState(a, redisUrl);
  const stopWatches: Array<() => void> = [];
  let processes: Processes | undefined;
  const plane = viaMirror ? watchPlane(a, log) : undefined;
  const progress = await observeProgress({
    redisUrl,
    prefix: a.prefix,
    repeats: true,
    // The webhook applier's attempts are judged (invariant 4, quiescence) in a run that pushes its folder.
    kinds: withHook ? ["flux", "argocd", "webhook"] : ["flux", "argocd"],
  });
  let cleaning: Promise<void> | undefined;
  ctx.cleanup = () =>
    (cleaning ??= (async () => {
      for (const stop of stopWatches) stop();
      a.git.faults.clear();
      a.api.faults.reset();
      await processes?.close();
      await plane?.stop().catch(() => {});
      await progress.stop().catch(() => {});
      await a.stop();
      await redis?.remove();
    })());
  try {
    if (ctx.abandoned) throw new Error("the run passed its bound");
    ctx.at = "starting its processes";
    // A child's log lines join the run's: printed with --log, kept for a failure otherwise.
    processes = await startProcesses(a, need.children, (line) =>
      o.logLevel ? process.stdout.write(line) : keep(logs, line),
    );
    // With the watch plane, the converge at the start also waits for the mirror's initial snapshots
    // to be published (the barrier): on a loaded machine that alone can take half a minute.
    const start = o.unheld ? await tip(a) : await settled(a, viaMirror ? SETTLE_MIRROR_MS : undefined);
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
      ...(plane ? { mirror: { handed: plane.handed } } : {}),
      startValues: { flux: await gitValue(a, "flux"), argocd: await gitValue(a, "argocd") },
      edits: [],
      pushes: [],
      notes: [],
      refusals: [],
      cluster: { flux: [], argocd: [] },
      commits: [],
      final: { cluster: { flux: undefined, argocd: undefined }, git: { flux: undefined, argocd: undefined } },
      operations: [],
      ...(withHook ? { webhook: { pushes: [], final: { cluster: undefined, git: undefined } } } : {}),
    };
    ctx.record = record;
    for (const app of APPS) stopWatches.push(await watchValue(a.kubeConfig, app, record.cluster[app]));
    const attemptsBefore = progress.attempts().length;

    const pending: Array<Promise<void>> = [];
    for (const [i, action] of actions.entries()) {
      const which = `action ${i + 1} of ${actions.length}: ${describeAction(action)}`;
      ctx.at = `waiting ${action.gapMs} ms before ${which}`;
      if (action.gapMs) await new Promise((r) => setTimeout(r, action.gapMs));
      if (ctx.abandoned) throw new Error("the run passed its bound");
      ctx.at = `playing ${which}`;
      pending.push(play({ a, processes, redis, progress, plane }, action, record));
      // Restarts, pushes and a Redis restart take their time; edits and faults overlap whatever follows.
      if (action.kind === "restart" || action.kind === "push" || action.kind === "redis")
        await pending[pending.length - 1];
    }
    ctx.at = "waiting for the actions still going (edits and faults overlap what follows)";
    await Promise.all(pending);
    ctx.at = "waiting for quiescence";

    // Quiescence (test/soak/quiescence.ts): every accepted write published (or refused), no apply
    // due and not sent (the branch's decision state), every attempt of the run seen sent ended,
    // nothing the queues announced unread, the cluster holds Git's value for both apps, and nothing
    // (tip, attempts, reports) moved for QUIET_MS. The record is then read; if anything moved
    // meanwhile (an attempt sent once the wait had ended), the wait goes on, so the record judged
    // is the quiet one.
    const answers = connectRedis(redisUrl);
    const unpublished = async () => {
      const ids = [...record.edits, ...record.notes].filter((e) => e.status === 202 && e.id).map((e) => e.id);
      const keys = ids.map((id) => writePublishedKey(a.prefix, id as string));
      const got = keys.length ? await answers.mget(...keys) : [];
      return got.filter((v) => v === null).length;
    };
    const decisions = branchKeys(a.prefix, a.demo.key).decisions;
    const due = async () => {
      const raw = await answers.get(decisions);
      const s = raw ? (JSON.parse(raw) as DecisionState) : undefined;
      return Object.values(s?.appliers ?? {})
        .filter((ap) => hasPending(ap.pending))
        .map((ap) => `${ap.applier.kind} (${kindsPending(ap.pending).join(", ")})`)
        .sort();
    };
    const look = async (): Promise<Look> => {
      handedEdits(record);
      const waiting = await unpublished();
      const dueNow = o.unheld ? [] : await due();
      const differ: string[] = [];
      for (const app of APPS)
        if ((await gitValue(a, app)) !== (await clusterValue(a, app)).greeting) differ.push(app);
      if (withHook && (await hookGitValue(a)) !== (await hookClusterValue(a))) differ.push("webhook");
      const head = await tip(a);
      // Read last, so an attempt sent while the values were read is in this look.
      const phases = progress.phases();
      return {
        at: Date.now(),
        unpublished: waiting,
        // The run's attempts (invariant 4's): the converge's at the start is settled before the record
        // starts, and its end may have come before the observer could read the reports.
        sent: o.unheld
          ? []
          : progress
              .attempts()
              .slice(attemptsBefore)
              .map((at) => at.token),
        ended: phases.filter((p) => TERMINAL.has(p.phase)).map((p) => p.token),
        unread: progress.unread(),
        due: dueNow,
        differ,
        tip: head,
        events: progress.events.length,
      };
    };
    const end = await waitQuiet({
      look,
      readRecord: () => readFinal(a, record, start),
      drained: () => progress.drained(),
      quietMs: QUIET_MS,
      timeoutMs: o.quiesceTimeoutMs ?? 90_000,
      everyMs: 200,
      now: Date.now,
      sleep: (ms) => new Promise((r) => setTimeout(r, ms)),
      onMoved: (at, after) =>
        log.info(
          {
            quietAt: at.at - t0,
            lookedAt: after.at - t0,
            open: openAttempts(after),
            events: after.events - at.events,
          },
          "soak: quiet, but something moved while the record was read; waiting on",
        ),
    }).finally(() => answers.disconnect());
    for (const stop of stopWatches.splice(0)) stop();
    record.endedAt = Date.now();
    // Not quiet within the bound: judged as it stands, with a violation that says what was open.
    if (!end.quiet) await readFinal(a, record, start);
    handedEdits(record);
    await progress.stop();
    // A quiet run is judged on the attempts the quiet look saw (one sent after is not the run's).
    const judged = end.quiet ? new Set(end.look.sent) : undefined;
    const attempts = progress
      .attempts()
      .slice(attemptsBefore)
      .filter((at) => !judged || judged.has(at.token));
    record.operations = attempts.map((at) => ({
      token: at.token,
      app: at.applier.kind,
      commit: at.commit,
      sentAt: Date.parse(at.sentAt),
      reasons: [...new Set(at.targets.map((t) => t.reason))],
      phases: progress
        .phases()
        .filter((p) => p.token === at.token)
        .map((p) => ({ phase: p.phase, at: Date.parse(p.at) })),
      rechecksEdits: at.editsAfter !== undefined,
    }));
    const checked = checkRun(record);
    const reverts = checked.reverts;
    const violations: Violation[] = [
      ...(end.quiet
        ? []
        : [
            {
              invariant: "quiescent" as const,
              detail: `not quiet after ${((o.quiesceTimeoutMs ?? 90_000) / 1000).toFixed(0)} s: ${
                end.look ? whyNotQuiet(end.look) : "never looked"
              }`,
            },
          ]),
      ...checked.violations,
    ];
    return {
      seed: o.seed,
      actions,
      violations,
      reverts,
      seconds: (Date.now() - t0) / 1000,
      startedAt: t0,
      timeline: timeline(record, t0),
      logs: violations.length ? logs : [],
    };
  } catch (err) {
    // Read before the cleanup below removes it: a start that never converged is studied from here.
    if (!ctx.abandoned) ctx.state = await readState(ctx);
    throw err;
  } finally {
    await ctx.cleanup();
  }
}

/** What `inspect` reads, or why it could not. */
async function readState(ctx: RunContext): Promise<string[]> {
  return (await ctx.inspect?.().catch((err: unknown) => [`could not read the state: ${String(err)}`])) ?? [];
}

/** The last 5,000 log lines of a run, kept for a failure to print. */
function keep(logs: string[], line: string): void {
  logs.push(line);
  if (logs.length > 5_000) logs.splice(0, logs.length - 5_000);
}

type Assembly = Awaited<ReturnType<typeof startAssembly>>;

const TERMINAL = new Set<string>(TERMINAL_PHASES);
/** How long nothing may move before a run counts as quiet. */
const QUIET_MS = 3_000;

interface Stage {
  a: Assembly;
  processes: Processes;
  redis: RestartableRedis | undefined;
  progress: Awaited<ReturnType<typeof observeProgress>>;
  /** The watch plane, in a `--mirror` run. */
  plane: WatchPlane | undefined;
}

/**
 * The watch plane of a `--mirror` run: the assembly's mirror, replaced by a new one on a restart,
 * and every write each of them handed to an inbox, stamped when it was there (just after the
 * intake gate took it, as `Mirror.sent` gains it).
 */
interface WatchPlane {
  handed: HandedWrite[];
  restart(): Promise<void>;
  stop(): Promise<void>;
}

function watchPlane(a: Assembly, log: Logger): WatchPlane {
  const handed: HandedWrite[] = [];
  const record = (m: Mirror) => {
    const push = m.sent.push.bind(m.sent);
    m.sent.push = (...ws) => {
      for (const w of ws) handed.push(handedWrite(w, Date.now()));
      return push(...ws);
    };
    return m;
  };
  let current = record(a.mirror as Mirror);
  let restarts = 0;
  return {
    handed,
    async restart() {
      await current.stop();
      const next = record(
        new Mirror({
          kubeConfig: a.identities.mirror.kubeConfig,
          redisUrl: a.redis.url,
          redisPrefix: a.prefix,
          log: log.child({ component: "mirror", restart: ++restarts }),
          statusIntervalMs: 500,
        }),
      );
      current = next;
      await next.start();
    },
    // The assembly stops the first one; a later one is the run's.
    stop: () => (current === a.mirror ? Promise.resolve() : current.stop()),
  };
}

/** What one handed write set of the demo objects: a key counts only where it differs from the write's base. */
function handedWrite(w: Mirror["sent"][number], at: number): HandedWrite {
  const change = w.changes[0] as { object?: k8s.V1ConfigMap; base?: k8s.V1ConfigMap } | undefined;
  const meta = change?.object?.metadata;
  const app = APPS.find(
    (x) => DEMO_APPS[x].name === meta?.name && DEMO_APPS[x].namespace === meta?.namespace,
  );
  const set = (key: "greeting" | "note") => {
    const v = change?.object?.data?.[key];
    return v !== undefined && v !== change?.base?.data?.[key] ? v : undefined;
  };
  return {
    id: w.id,
    app,
    at,
    applier: w.applierAuthored !== undefined,
    snapshot: w.snapshot !== undefined,
    greeting: set("greeting"),
    note: set("note"),
  };
}

/**
 * In a `--mirror` run: each edit and note the mirror handed takes the id and time of the first
 * write (not the applier's) that set its value after it was made; one never handed stays at 0.
 */
function handedEdits(r: RunRecord): void {
  const handed = r.mirror?.handed;
  if (!handed) return;
  for (const [list, key] of [
    [r.edits, "greeting"],
    [r.notes, "note"],
  ] as const)
    for (const e of list) {
      if (e.status === 202) continue;
      const h = handed.find((h) => h.app === e.app && !h.applier && h[key] === e.value && h.at >= e.at);
      if (h) Object.assign(e, { status: 202, id: h.id, acceptedAt: h.at });
    }
}

/** An edit as a person makes it with kubectl: a merge patch of one key, under the person's field manager. */
async function clusterEdit(a: Assembly, app: DemoApp, data: Record<string, string>, manager: string) {
  const core = a.kubeConfig.makeApiClient(k8s.CoreV1Api);
  const { name, namespace } = DEMO_APPS[app];
  return core.patchNamespacedConfigMap({ name, namespace, body: { data }, fieldManager: manager }, MERGE);
}

const MERGE = k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch);

async function play(
  { a, processes, redis, progress, plane }: Stage,
  action: Action,
  record: RunRecord,
): Promise<void> {
  switch (action.kind) {
    case "edit":
      if (action.whileApplying) await applying(progress, action.app);
      return edit(a, action.app, action.value, action.save, record);
    case "note":
      if (action.whileReverted) await reverted(record, action.app);
      return noteEdit(a, action.app, action.value, record);
    case "burst":
      // Edits of one app within one second: each starts 0–300 ms after the one before (the gaps are
      // the action itself, not a wait for anything).
      await Promise.all(
        action.values.map(async (value, i) => {
          await pause(i * (100 + (value.length % 3) * 100));
          await edit(a, action.app, value, true, record);
        }),
      );
      return;
    case "push":
      return push(a, action.app, action.value, action.note, record);
    case "refuse":
      return refuse(a, action.app, action.value, record);
    case "hook":
      return hookPush(a, action.value, record);
    case "restart":
      if (action.process === "mirror") {
        if (!plane) throw new Error("a mirror restart needs a --mirror run");
        return plane.restart();
      }
      return processes.restart(action.process, action.kill);
    case "redis":
      if (!redis) throw new Error("a Redis restart needs the run's private Redis");
      await redis.stop();
      await pause(action.downMs);
      await redis.start();
      return;
    case "git":
      switch (action.fault) {
        case "outage":
          a.git.faults.setDown(true);
          await pause(action.ms);
          a.git.faults.setDown(false);
          return;
        case "stall": {
          const held = a.git.faults.stallNext(1, action.of);
          await pause(action.ms);
          held.release();
          return;
        }
        case "lost-reply":
          a.git.faults.dropPushReply(1);
          return;
      }
      return;
    case "api":
      switch (action.fault) {
        case "409":
          for (const method of ["PATCH", "PUT"])
            a.api.faults.failNext(action.n, { method, pathPrefix: action.scope, status: 409 });
          return;
        case "500":
          a.api.faults.failNext(action.n, { pathPrefix: action.scope, status: 500 });
          return;
        case "410":
          a.api.faults.expireHistory();
          a.api.faults.dropWatches();
          return;
      }
  }
}

/** Until an apply of the app's applier is Running and not ended (a scripted run's condition). */
async function applying(progress: Stage["progress"], app: DemoApp): Promise<void> {
  await until(
    () => {
      const phases = progress.phases();
      return progress
        .attempts()
        .some(
          (at) =>
            at.applier.kind === app &&
            phases.some((p) => p.token === at.token && p.phase === "Running") &&
            !phases.some((p) => p.token === at.token && TERMINAL.has(p.phase)),
        );
    },
    `an apply of ${app} running`,
    { timeoutMs: 60_000, everyMs: 10 },
  );
}

/** Until the cluster shows an applier's value over the app's last edit (a scripted run's condition). */
async function reverted(record: RunRecord, app: DemoApp): Promise<void> {
  await until(
    () => {
      const edit = record.edits.filter((e) => e.app === app).at(-1);
      const now = record.cluster[app].at(-1);
      return !!edit && !!now && now.at > edit.at && now.manager !== USER_MANAGER && now.value !== edit.value;
    },
    `an applier's write over the last edit of ${app}`,
    { timeoutMs: 60_000, everyMs: 5 },
  );
}

/** Each run's reporter of API edits (one chain, as the watch plane has one per branch). */
const reporters = new WeakMap<RunRecord, Report>();
function reportOf(record: RunRecord): Report {
  let r = reporters.get(record);
  if (!r) {
    r = reporter();
    reporters.set(record, r);
  }
  return r;
}

/** A pause that is part of an action (an outage's length, a gap between edits), not a wait for a condition. */
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What a mirror does while the gateway cannot take a write (503 while Redis is away, 429): tries again. */
async function deliver<T extends { status: number }>(send: () => Promise<T>, what: string): Promise<T> {
  return until(
    async () => {
      const answer = await send();
      return answer.status === 503 || answer.status === 429 ? undefined : answer;
    },
    what,
    { timeoutMs: 60_000, everyMs: 250, retryErrors: true },
  );
}

async function edit(
  a: Assembly,
  app: DemoApp,
  value: string,
  save: boolean,
  record: RunRecord,
): Promise<void> {
  if (record.mirror) {
    // The watch plane is the only reporter: the edit is made on the cluster, and no more.
    const at = Date.now();
    await clusterEdit(a, app, { greeting: value }, USER_MANAGER);
    record.edits.push({ app, value, at, save: false, status: 0, message: "" });
    return;
  }
  const core = a.kubeConfig.makeApiClient(k8s.CoreV1Api);
  const { name, namespace } = DEMO_APPS[app];
  const at = Date.now();
  const written = await core.patchNamespacedConfigMap(
    {
      name,
      namespace,
      body: demoConfigMap(app, { greeting: value }),
      fieldManager: USER_MANAGER,
      force: true,
    },
    APPLY,
  );
  const message = `${app}: set greeting to ${value}`;
  // The edit is on the cluster; its report joins the run's one chain of reports (sent again
  // while the gateway cannot take writes: Redis away).
  const answer = await reportOf(record)(() =>
    deliver(
      () =>
        postWrite(a, app, writeBody(namedChange(app, written, "greeting"), save, at, message), {
          wait: false,
        }),
      `the gateway to take ${app} = ${value}`,
    ),
  );
  record.edits.push({
    app,
    value,
    at,
    save,
    status: answer.status,
    message,
    ...(answer.body.id ? { id: answer.body.id } : {}),
    acceptedAt: Date.now(),
  });
}

/**
 * The change a mirror reports for one edit, as the intake takes it: the object as the cluster holds
 * it just after the edit, and as its base the same object before the edit (the edited key as it
 * was: absent, since only this actor sets it), so the write names the one key it changed and every
 * other field keeps Git's value — a greeting a late apply put back on the cluster included.
 */
function namedChange(app: DemoApp, written: k8s.V1ConfigMap, key: "greeting" | "note") {
  const object = demoConfigMap(app, { ...(written.data ?? {}) });
  const { [key]: _edited, ...before } = object.data as Record<string, string>;
  return { op: "upsert", object, base: { ...object, data: before } };
}

const writeBody = (
  change: ReturnType<typeof namedChange>,
  save: boolean,
  editedAt: number,
  message: string,
) => ({
  changes: [change],
  author: { name: "user", email: "user@example.com" },
  message,
  save,
  // Whole seconds, as the server's managedFields record the edit.
  editedAt: new Date(Math.floor(editedAt / 1000) * 1000).toISOString(),
});

const APPLY = k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.ServerSideApply);

/**
 * An edit of another key (`note`), by a field manager of its own so the greeting keeps its owner.
 * The write reports the object as the cluster holds it then, greeting included, as a mirror does,
 * with the object before the edit as its base: the note is the one field it changed.
 */
async function noteEdit(a: Assembly, app: DemoApp, value: string, record: RunRecord): Promise<void> {
  if (record.mirror) {
    const at = Date.now();
    const written = await clusterEdit(a, app, { note: value }, `${USER_MANAGER}-notes`);
    record.notes.push({
      app,
      value,
      at,
      save: false,
      status: 0,
      message: "",
      greeting: written.data?.greeting,
    });
    return;
  }
  const core = a.kubeConfig.makeApiClient(k8s.CoreV1Api);
  const { name, namespace } = DEMO_APPS[app];
  const at = Date.now();
  const written = await core.patchNamespacedConfigMap(
    {
      name,
      namespace,
      body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name, namespace }, data: { note: value } },
      fieldManager: `${USER_MANAGER}-notes`,
      force: true,
    },
    APPLY,
  );
  const message = `${app}: set note to ${value}`;
  const answer = await reportOf(record)(() =>
    deliver(
      () =>
        postWrite(a, app, writeBody(namedChange(app, written, "note"), true, at, message), { wait: false }),
      `the gateway to take ${app} note = ${value}`,
    ),
  );
  record.notes.push({
    app,
    value,
    at,
    save: true,
    status: answer.status,
    message,
    greeting: written.data?.greeting,
    ...(answer.body.id ? { id: answer.body.id } : {}),
  });
}

/**
 * Somebody pushes with the git CLI: the greeting, or only the note (keeping the greeting the tip
 * has). A push that fails for a Git fault is tried again, as a person would; one whose reply was
 * lost but that landed is found on the branch by its subject.
 */
async function push(
  a: Assembly,
  app: DemoApp,
  value: string,
  note: boolean,
  record: RunRecord,
): Promise<void> {
  const { objectYaml } = await import("../../queue/git/layout.js");
  const subject = `${note ? "note" : "greeting"} ${value} (pushed to Git)`;
  const gitDir = join(a.git.root, `${DEMO_REPO}.git`);
  const landed = async () =>
    (
      await gitOk(["--git-dir", gitDir, "log", "--format=%H", "-F", `--grep=${subject}`, a.demo.branch])
    ).trim() || undefined;
  const commit = await until(
    async () => {
      const already = await landed();
      if (already) return already;
      const peer = await GitPeer.clone(a.demo.repoUrl, a.demo.branch);
      try {
        const path = demoConfigPath(app);
        const data: Record<string, string> = note
          ? {
              greeting: /greeting: (.*)/.exec(await peer.readFile(path))?.[1]?.trim() ?? "hello",
              note: value,
            }
          : { greeting: value };
        await peer.writeFile(path, objectYaml(demoConfigMap(app, data)));
        await peer.commit(subject);
        const out = await peer.push();
        // Rejected (the branch moved): the next try clones the new tip and sets the file on it.
        return out.ok ? (await gitOk(["rev-parse", "HEAD"], { cwd: peer.dir })).trim() : await landed();
      } finally {
        await peer.remove();
      }
    },
    `the push of ${subject}`,
    { timeoutMs: 60_000, everyMs: 200, retryErrors: true },
  );
  const pushedGreeting = /greeting: (.*)/
    .exec(await gitOk(["--git-dir", gitDir, "show", `${commit}:${demoConfigPath(app)}`]))?.[1]
    ?.trim();
  record.pushes.push({ app, value: pushedGreeting ?? value, at: Date.now(), commit, subject });
}

/**
 * Somebody pushes a new greeting of the webhook applier's folder with the git CLI (tried again on
 * a Git fault, as `push` is); the worker sends it to the WebhookClaim's deployer.
 */
async function hookPush(a: Assembly, value: string, record: RunRecord): Promise<void> {
  const { objectYaml } = await import("../../queue/git/layout.js");
  const subject = `webhook greeting ${value} (pushed to Git)`;
  const gitDir = join(a.git.root, `${DEMO_REPO}.git`);
  const landed = async () =>
    (
      await gitOk(["--git-dir", gitDir, "log", "--format=%H", "-F", `--grep=${subject}`, a.demo.branch])
    ).trim() || undefined;
  const commit = await until(
    async () => {
      const already = await landed();
      if (already) return already;
      const peer = await GitPeer.clone(a.demo.repoUrl, a.demo.branch);
      try {
        await peer.writeFile(demoWebhookConfigPath(), objectYaml(demoWebhookConfigMap({ greeting: value })));
        await peer.commit(subject);
        const out = await peer.push();
        return out.ok ? (await gitOk(["rev-parse", "HEAD"], { cwd: peer.dir })).trim() : await landed();
      } finally {
        await peer.remove();
      }
    },
    `the push of ${subject}`,
    { timeoutMs: 60_000, everyMs: 200, retryErrors: true },
  );
  record.webhook?.pushes.push({ value, at: Date.now(), commit, subject });
}

/** The webhook folder's greeting at the tip of the branch. */
async function hookGitValue(a: Assembly): Promise<string | undefined> {
  const gitDir = join(a.git.root, `${DEMO_REPO}.git`);
  const text = await gitOk(["--git-dir", gitDir, "show", `${a.demo.branch}:${demoWebhookConfigPath()}`]);
  return /greeting: (.*)/.exec(text)?.[1]?.trim();
}

/** The greeting the deployer applied to the cluster. */
async function hookClusterValue(a: Assembly): Promise<string | undefined> {
  const core = a.kubeConfig.makeApiClient(k8s.CoreV1Api);
  const cm = await core.readNamespacedConfigMap({
    name: DEMO_WEBHOOK_APP.name,
    namespace: DEMO_WEBHOOK_APP.namespace,
  });
  return cm.data?.greeting;
}

/** An edit on the cluster the mirror refuses: reported to the refusals endpoint, never to Git. */
async function refuse(a: Assembly, app: DemoApp, value: string, record: RunRecord): Promise<void> {
  const core = a.kubeConfig.makeApiClient(k8s.CoreV1Api);
  const { name, namespace } = DEMO_APPS[app];
  const at = Date.now();
  await core.patchNamespacedConfigMap(
    {
      name,
      namespace,
      body: demoConfigMap(app, { greeting: value }),
      fieldManager: USER_MANAGER,
      force: true,
    },
    APPLY,
  );
  const target = app === "flux" ? "flux-app" : "argo-app";
  const answer = await deliver(async () => {
    const res = await fetch(`${a.gateway.url}/v1/targets/${DEMO_NAMESPACE}/${target}/refusals`, {
      method: "POST",
      headers: { authorization: `Bearer ${INTAKE_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({
        object: { apiVersion: "v1", kind: "ConfigMap", namespace, name },
        reason: `the greeting ${value} is not allowed`,
      }),
    });
    await res.body?.cancel();
    return { status: res.status };
  }, `the gateway to take the refusal of ${app} = ${value}`);
  record.refusals.push({ app, value, at, status: answer.status });
}

/** The record's end: the branch's commits since the run's start, and each value on the cluster and in Git. */
async function readFinal(a: Assembly, record: RunRecord, start: string): Promise<void> {
  record.commits = await commitsAfter(a, start);
  for (const app of APPS) {
    record.final.cluster[app] = (await clusterValue(a, app)).greeting;
    record.final.git[app] = await gitValue(a, app);
  }
  if (record.webhook)
    record.webhook.final = { cluster: await hookClusterValue(a), git: await hookGitValue(a) };
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
  const trailer = new RegExp(`^${WRITE_TRAILER}: (\\S+)$`, "gm");
  const commits: RunRecord["commits"] = [];
  for (const line of out.split("\n").filter(Boolean)) {
    const sha = line.slice(0, 40);
    const values = { flux: undefined, argocd: undefined } as Record<DemoApp, string | undefined>;
    const notes = { flux: undefined, argocd: undefined } as Record<DemoApp, string | undefined>;
    for (const app of APPS) {
      const text = await gitOk(["--git-dir", gitDir, "show", `${sha}:${demoConfigPath(app)}`]).catch(
        () => "",
      );
      values[app] = /greeting: (.*)/.exec(text)?.[1]?.trim();
      notes[app] = /note: (.*)/.exec(text)?.[1]?.trim();
    }
    const body = await gitOk(["--git-dir", gitDir, "show", "-s", "--format=%b", sha]);
    const writeIds = [...body.matchAll(trailer)].map((m) => m[1] as string);
    commits.push({ sha, subject: line.slice(41), values, notes, writeIds });
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
    ...r.notes.map((e) => ({
      t: e.at,
      line: `${ms(e.at)}  edit ${e.app} note = ${e.value} (greeting ${e.greeting}) → ${e.status}`,
    })),
    ...(r.mirror?.handed ?? []).map((h) => ({
      t: h.at,
      line: `${ms(h.at)}  mirror handed ${h.app ?? "?"} ${h.id}${h.greeting !== undefined ? ` greeting ${h.greeting}` : ""}${
        h.note !== undefined ? ` note ${h.note}` : ""
      }${h.applier ? " (the applier's)" : ""}${h.snapshot ? " (snapshot)" : ""}`,
    })),
    ...r.refusals.map((e) => ({
      t: e.at,
      line: `${ms(e.at)}  refused edit ${e.app} = ${e.value} → ${e.status}`,
    })),
    ...r.pushes.map((p) => ({
      t: p.at,
      line: `${ms(p.at)}  push ${p.app} "${p.subject}" greeting ${p.value} (${p.commit.slice(0, 8)})`,
    })),
    ...(r.webhook?.pushes ?? []).map((p) => ({
      t: p.at,
      line: `${ms(p.at)}  push webhook "${p.subject}" (${p.commit.slice(0, 8)})`,
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
    ...(r.endedAt !== undefined
      ? [{ t: r.endedAt, line: `${ms(r.endedAt)}  the record read (the run's end)` }]
      : []),
  ]
    .sort((x, y) => x.t - y.t)
    .map((x) => x.line)
    .concat(
      r.commits.map(
        (c) =>
          `commit ${c.sha.slice(0, 8)} ${c.subject}  [flux=${c.values.flux} argocd=${c.values.argocd}${
            c.notes?.flux || c.notes?.argocd ? ` notes: flux=${c.notes.flux} argocd=${c.notes.argocd}` : ""
          }]`,
      ),
    );
}

/** One revert on one line, times from the run's start: the edit, its write's acknowledgement, the operation that wrote the older value. */
export function describeRevert(v: Revert, t0: number): string {
  const ms = (t: number | undefined) => (t === undefined ? "—" : `${t - t0}`);
  const by = v.by
    ? `by ${v.by.token} (${v.by.commit.slice(0, 8)}: sent ${ms(v.by.sentAt)}, Requested ${ms(v.by.requestedAt)}, Running ${ms(v.by.runningAt)}, ended ${ms(v.by.endedAt)})`
    : "by no operation out";
  const kind = v.residue ? `accepted: ${v.residue}` : "VIOLATION";
  return `${v.app}: ${v.from} → ${v.to ?? "(none)"} at ${ms(v.at)} for ${v.lastedMs} ms${
    v.undone ? "" : " (never undone)"
  } [${kind}]; edit at ${ms(v.edit.at)}, accepted ${ms(v.edit.acceptedAt)}; ${by}${
    v.by?.rechecksEdits === false ? ", no recheck" : ""
  }${
    v.repair
      ? `; next ${v.repair.token} (${v.repair.reasons.join(", ")}): sent ${ms(v.repair.sentAt)}, Running ${ms(v.repair.runningAt)}`
      : "; no operation after it"
  }`;
}

export { describeAction };

/**
 * The claims' hold and record, and the branch's decision state (each applier's pending reasons,
 * why it is not due, each GitTarget's barrier), one line each.
 */
async function inspectState(a: Assembly, redisUrl: string): Promise<string[]> {
  const lines: string[] = [];
  for (const app of ["flux", "argocd", "webhook"] as const) {
    const c = await readClaim(a, app);
    const status = (c?.status ?? {}) as {
      conditions?: Array<{ type: string; status: string; reason?: string }>;
      lastAppliedCommit?: string;
      operation?: { token?: string; phase?: string; commit?: string };
    };
    const conds = (status.conditions ?? []).map(
      (x) => `${x.type}=${x.status}${x.reason ? `(${x.reason})` : ""}`,
    );
    lines.push(
      `${app} claim: ${c ? conds.join(" ") : "absent"}; lastAppliedCommit ${status.lastAppliedCommit?.slice(0, 8) ?? "none"}; operation ${status.operation ? `${status.operation.token} ${status.operation.phase} ${status.operation.commit?.slice(0, 8)}` : "none"}`,
    );
  }
  const redis = connectRedis(redisUrl);
  try {
    const raw = await redis.get(branchKeys(a.prefix, a.demo.key).decisions);
    if (!raw) return [...lines, "decision state: none saved"];
    const s = JSON.parse(raw) as DecisionState;
    lines.push(
      `decision state: tip ${s.tip?.slice(0, 8) ?? "none"}, observed ${s.observed}, flush ${s.flush === null ? "none" : "in progress"}, ${s.unpublished.length} unpublished`,
    );
    for (const [key, ap] of Object.entries(s.appliers)) {
      lines.push(
        `${key}: pending [${kindsPending(ap.pending).join(", ")}], operation ${ap.operation?.token ?? "none"}, lastApplied ${ap.lastAppliedCommit?.slice(0, 8) ?? "none"}, not due: ${notDueBecause(s, key, Date.now()) ?? "(due)"}`,
      );
    }
    for (const t of Object.values(s.targets))
      lines.push(
        `target ${t.namespace}/${t.name}: claim ${t.claim}, folderAt ${t.folderAt?.slice(0, 8) ?? "none"}, watch ${t.watch ?? "none"}, initialSnapshotsAt ${t.initialSnapshotsAt ?? "none"}`,
      );
    return lines;
  } finally {
    redis.disconnect();
  }
}
