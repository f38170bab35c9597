/**
 * What one soak run does, drawn from its seed before anything starts: a list of actions with the
 * pause before each. Pure, so a seed names its run exactly and `--replay` plays it again.
 */
import type { DemoApp } from "../playground/demo.js";
import { type Random, seeded } from "./random.js";

export const APPS: readonly DemoApp[] = ["flux", "argocd"];
export type Restartable = "worker" | "flux" | "argocd";
export const RESTARTABLE: readonly Restartable[] = ["worker", "flux", "argocd"];
/**
 * With `mirror`: the watch plane restarts too. It runs in the run's own process, so its restart is
 * graceful only (a stop, then a new process's start: new coverage rounds, initial snapshots).
 */
export type MirrorRestartable = Restartable | "mirror";
const MIRROR_RESTARTABLE: readonly MirrorRestartable[] = [...RESTARTABLE, "mirror"];

/** Faults of the Git host (test/git/server.ts). */
export type GitFault =
  /** Every request answered 503 for `ms`. */
  | { fault: "outage"; ms: number }
  /** The next request of a kind held unanswered for `ms`. */
  | { fault: "stall"; ms: number; of: "push" | "fetch" | "any" }
  /** The next push lands, but its reply is lost (the connection drops). */
  | { fault: "lost-reply" };

/** Where the product talks to the API server: its claims and GitTargets, the appliers' objects. */
export const API_SCOPES = [
  "/apis/applygate.dev/",
  "/apis/kustomize.toolkit.fluxcd.io/",
  "/apis/source.toolkit.fluxcd.io/",
  "/apis/argoproj.io/",
] as const;

/**
 * Where a real API server can answer a write 409: the writes guarded by a resourceVersion (the
 * claims' and GitTargets' status, the Argo CD Application's update). A merge patch or a forced
 * apply without one (the Flux stamps and suspends) never meets a conflict.
 */
export const CONFLICT_SCOPES = ["/apis/applygate.dev/", "/apis/argoproj.io/"] as const;

/** Faults of the Kubernetes API server (test/cluster/apiserver/faults.ts). */
export type ApiFault =
  /** The next `n` writes (PATCH/PUT) under a path answered 409 Conflict. */
  | { fault: "409"; n: number; scope: (typeof CONFLICT_SCOPES)[number] }
  /** The next `n` requests under a path answered 500. */
  | { fault: "500"; n: number; scope: (typeof API_SCOPES)[number] }
  /** The history forgotten and every watch ended, so each one resumes into 410 Gone and lists again. */
  | { fault: "410" };

export type Action =
  /** An API edit of the app's greeting, reported through the intake (a save closes its commit window). */
  | {
      kind: "edit";
      app: DemoApp;
      value: string;
      save: boolean;
      gapMs: number;
      /** A scripted run only: made once, after the gap, an apply of the app's applier is Running. */
      whileApplying?: boolean;
    }
  /** An API edit of another key of the same object (`note`); the write carries the object as the cluster holds it. */
  | {
      kind: "note";
      app: DemoApp;
      value: string;
      gapMs: number;
      /** False with `mirror`: the watched note joins the open commit window like any mirrored edit. */
      save?: boolean;
      /** A scripted run only: made once, after the gap, an applier's write is over the app's last edit. */
      whileReverted?: boolean;
    }
  /** Several saved edits of one app within one second. */
  | { kind: "burst"; app: DemoApp; values: string[]; gapMs: number }
  /** Somebody pushes a new greeting to Git with the git CLI (`note`: only the other key). */
  | { kind: "push"; app: DemoApp; value: string; note: boolean; gapMs: number }
  /**
   * Somebody pushes a new greeting of the third folder (apps/webhook), which the webhook applier
   * applies through the playground's deployer. Drawn only with `webhook` (`--webhook`).
   */
  | { kind: "hook"; value: string; gapMs: number }
  /** An edit on the cluster that the mirror refuses (it never reaches Git; the GitTarget reapplies). */
  | { kind: "refuse"; app: DemoApp; value: string; gapMs: number }
  /** A stop and start of one process: graceful (SIGTERM) or SIGKILL (never the mirror). */
  | { kind: "restart"; process: MirrorRestartable; kill: boolean; gapMs: number }
  /** Redis stopped (SIGTERM, its append-only file kept) and started again on its port after `downMs`. */
  | { kind: "redis"; downMs: number; gapMs: number }
  | ({ kind: "git"; gapMs: number } & GitFault)
  | ({ kind: "api"; gapMs: number } & ApiFault);

export interface PlanOptions {
  actions: number;
  /**
   * Draw pushes of the webhook applier's folder too. Off by default: the weights then are the
   * ones every seed played so far was drawn with, so those seeds replay as before.
   */
  webhook?: boolean;
  /**
   * The watch plane is the only reporter of edits (`--mirror`): edits and notes are made on the
   * cluster with no intake call and join commit windows (the mirror has no save), no refusal is
   * drawn (the demo objects hold nothing the mirror refuses), and restarts draw the mirror too.
   * Off by default, so every seed played without it draws the plan it always drew.
   */
  mirror?: boolean;
}

/** Relative weights of the action kinds. */
const WEIGHTS: ReadonlyArray<[Action["kind"], number]> = [
  ["edit", 36],
  ["note", 5],
  ["burst", 8],
  ["push", 20],
  ["refuse", 5],
  ["restart", 12],
  ["redis", 3],
  ["git", 6],
  ["api", 6],
];

/** With `webhook`: the same, and pushes of the webhook folder as often as foreign pushes of one app. */
const WEBHOOK_WEIGHTS: ReadonlyArray<[Action["kind"], number]> = [...WEIGHTS, ["hook", 10]];

/** With `mirror`: the same, without refusals (the watch plane refuses only what the demo never holds). */
const MIRROR_WEIGHTS: ReadonlyArray<[Action["kind"], number]> = WEIGHTS.filter(([k]) => k !== "refuse");

function kindOf(r: Random, weights: ReadonlyArray<[Action["kind"], number]>): Action["kind"] {
  const total = weights.reduce((s, [, w]) => s + w, 0);
  let x = r.next() * total;
  for (const [kind, w] of weights) {
    x -= w;
    if (x < 0) return kind;
  }
  return "edit";
}

/** Pauses: often none (actions overlap), often short, sometimes long enough for an apply to end. */
function gap(r: Random): number {
  const roll = r.next();
  if (roll < 0.25) return 0;
  if (roll < 0.7) return r.int(50, 600);
  return r.int(600, 2500);
}

function gitFault(r: Random): GitFault {
  const roll = r.next();
  if (roll < 0.35) return { fault: "outage", ms: r.int(300, 3000) };
  if (roll < 0.7)
    return { fault: "stall", ms: r.int(300, 4000), of: r.pick(["push", "fetch", "any"] as const) };
  return { fault: "lost-reply" };
}

function apiFault(r: Random): ApiFault {
  const roll = r.next();
  if (roll < 0.4) return { fault: "409", n: r.int(3, 12), scope: r.pick(CONFLICT_SCOPES) };
  // A 500 fails the request it meets: before an apply starts that ends the attempt, which is given
  // back and retried after a backoff that doubles from 2 s; once it runs, the executor follows on.
  // A few in a row, so the run's bounded wait outlasts them.
  if (roll < 0.75) return { fault: "500", n: r.int(1, 3), scope: r.pick(API_SCOPES) };
  return { fault: "410" };
}

/**
 * Every draw comes from one generator in a fixed order, so the seed alone names the run. The
 * kind-specific draws follow the common ones (gap, app), whatever the kind.
 */
export function planRun(seed: number, o: PlanOptions): Action[] {
  const r = seeded(seed);
  const actions: Action[] = [];
  const base = o.mirror ? MIRROR_WEIGHTS : WEIGHTS;
  const weights = o.webhook ? [...base, ...WEBHOOK_WEIGHTS.slice(WEIGHTS.length)] : base;
  for (let i = 0; i < o.actions; i++) {
    const kind = kindOf(r, weights);
    const gapMs = gap(r);
    const app = r.pick(APPS);
    switch (kind) {
      case "edit":
        // The draw is made either way, so the generator's order is the flag's only difference.
        actions.push({ kind, app, value: `e${i}`, save: r.chance(0.7) && !o.mirror, gapMs });
        break;
      case "note":
        actions.push({ kind, app, value: `n${i}`, gapMs, ...(o.mirror ? { save: false } : {}) });
        break;
      case "burst":
        actions.push({
          kind,
          app,
          values: Array.from({ length: r.int(2, 3) }, (_, j) => `b${i}-${j}`),
          gapMs,
        });
        break;
      case "push":
        actions.push({ kind, app, value: `p${i}`, note: r.chance(0.25), gapMs });
        break;
      case "refuse":
        actions.push({ kind, app, value: `r${i}`, gapMs });
        break;
      case "hook":
        actions.push({ kind, value: `w${i}`, gapMs });
        break;
      case "restart": {
        const process = r.pick(o.mirror ? MIRROR_RESTARTABLE : RESTARTABLE);
        const kill = r.chance(0.5) && process !== "mirror";
        actions.push({ kind, process, kill, gapMs });
        break;
      }
      case "redis":
        actions.push({ kind, downMs: r.int(200, 2000), gapMs });
        break;
      case "git":
        actions.push({ kind, gapMs, ...gitFault(r) });
        break;
      case "api":
        actions.push({ kind, gapMs, ...apiFault(r) });
        break;
    }
  }
  return actions;
}

/** Whether a plan needs each process in a child of its own (it SIGKILLs it) or a private Redis. */
export function needs(actions: readonly Action[]): { children: Set<Restartable>; privateRedis: boolean } {
  const children = new Set<Restartable>();
  for (const a of actions)
    if (a.kind === "restart" && a.kill && a.process !== "mirror") children.add(a.process);
  return { children, privateRedis: actions.some((a) => a.kind === "redis") };
}

/** One line per action, for a failing run's report. */
export function describeAction(a: Action): string {
  const pause = `+${a.gapMs}ms`;
  switch (a.kind) {
    case "edit":
      return `${pause} edit ${a.app} = ${a.value}${a.save ? " (save)" : ""}`;
    case "note":
      return `${pause} edit ${a.app} note = ${a.value}${a.save === false ? "" : " (save)"}`;
    case "burst":
      return `${pause} burst ${a.app} = ${a.values.join(", ")}`;
    case "push":
      return `${pause} push ${a.app} ${a.note ? "note" : "greeting"} = ${a.value}`;
    case "refuse":
      return `${pause} refused edit ${a.app} = ${a.value}`;
    case "hook":
      return `${pause} push webhook greeting = ${a.value}`;
    case "restart":
      return `${pause} ${a.kill ? "SIGKILL and start" : "restart"} ${a.process}`;
    case "redis":
      return `${pause} Redis down for ${a.downMs} ms`;
    case "git":
      return a.fault === "outage"
        ? `${pause} Git outage for ${a.ms} ms`
        : a.fault === "stall"
          ? `${pause} Git stalls the next ${a.of} request for ${a.ms} ms`
          : `${pause} Git loses the next push's reply`;
    case "api":
      return a.fault === "410"
        ? `${pause} API server forgets its history and ends every watch (410 on resume)`
        : `${pause} API server answers the next ${a.n} ${a.fault === "409" ? "writes" : "requests"} under ${a.scope} ${a.fault}`;
  }
}
