/**
 * What one soak run does, drawn from its seed before anything starts: a list of actions with the
 * pause before each. Pure, so a seed names its run exactly and `--replay` plays it again.
 */
import type { DemoApp } from "../playground/demo.js";
import { type Random, seeded } from "./random.js";

export const APPS: readonly DemoApp[] = ["flux", "argocd"];
export type Restartable = "worker" | "flux" | "argocd";

export type Action =
  /** An API edit of the app's greeting, reported through the intake (a save closes its commit window). */
  | { kind: "edit"; app: DemoApp; value: string; save: boolean; gapMs: number }
  /** Several saved edits of one app within one second. */
  | { kind: "burst"; app: DemoApp; values: string[]; gapMs: number }
  /** Somebody pushes a new greeting to Git with the git CLI. */
  | { kind: "push"; app: DemoApp; value: string; gapMs: number }
  /** A graceful stop and start of one process. */
  | { kind: "restart"; process: Restartable; gapMs: number };

export interface PlanOptions {
  actions: number;
}

/** Relative weights of the action kinds. */
const WEIGHTS: ReadonlyArray<[Action["kind"], number]> = [
  ["edit", 45],
  ["burst", 10],
  ["push", 30],
  ["restart", 15],
];

function kindOf(r: Random): Action["kind"] {
  const total = WEIGHTS.reduce((s, [, w]) => s + w, 0);
  let x = r.next() * total;
  for (const [kind, w] of WEIGHTS) {
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

export function planRun(seed: number, o: PlanOptions): Action[] {
  const r = seeded(seed);
  const actions: Action[] = [];
  for (let i = 0; i < o.actions; i++) {
    const kind = kindOf(r);
    const gapMs = gap(r);
    const app = r.pick(APPS);
    switch (kind) {
      case "edit":
        actions.push({ kind, app, value: `e${i}`, save: r.chance(0.7), gapMs });
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
        actions.push({ kind, app, value: `p${i}`, gapMs });
        break;
      case "restart":
        actions.push({ kind, process: r.pick(["worker", "flux", "argocd"] as const), gapMs });
        break;
    }
  }
  return actions;
}

/** One line per action, for a failing run's report. */
export function describeAction(a: Action): string {
  const pause = `+${a.gapMs}ms`;
  switch (a.kind) {
    case "edit":
      return `${pause} edit ${a.app} = ${a.value}${a.save ? " (save)" : ""}`;
    case "burst":
      return `${pause} burst ${a.app} = ${a.values.join(", ")}`;
    case "push":
      return `${pause} push ${a.app} = ${a.value}`;
    case "restart":
      return `${pause} restart ${a.process}`;
  }
}
