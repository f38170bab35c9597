/**
 * `applygate playground race`: the two-edit race, played twice on a fresh assembly each time.
 *
 * Each run makes the same two API edits to each demo app's ConfigMap (greeting "blue", then
 * "green"), each mirrored into Git as one save. The second edit lands right after the applier
 * fetched the first commit, the moment the race needs. The three appliers race at once: Flux,
 * Argo CD and the playground deployer (the webhook applier's endpoint, applying `apps/webhook`).
 *
 * - **own timers**: no claims. The Kustomization reconciles every second, the Application has
 *   automated sync (with self-heal) on and a one-second refresh, and the deployer builds every
 *   pushed commit of its folder as a CI pipeline on the Git host's push webhook does. The applier
 *   applies the first commit over the second edit: the cluster goes back to "blue" until a later
 *   apply brings "green" again.
 * - **held by applygate**: the claims hold the three appliers (the deployer applies only when its
 *   WebhookClaim calls it). The same edits give one commit each and no apply at all: the cluster
 *   already runs them, and nothing reverts "green".
 *
 * The race starts assemblies of its own (its own Redis prefix, Git server, API server and ports):
 * it needs the appliers' timing knobs in its own process and a clean history for each run, and
 * it never disturbs a playground that is running.
 */
import * as k8s from "@kubernetes/client-node";
import { errorMessage } from "../../queue/errors.js";
import type { Logger } from "../../queue/log.js";
import {
  apiEdit,
  appliedCommits,
  argoComparedCommit,
  clusterEdit,
  clusterValue,
  commitsSince,
  commitsTouching,
  fluxArtifactCommit,
  gitValue,
  holds,
  readClaim,
  settled,
  tip,
  USER_MANAGER,
  until,
  type ValueSample,
  watchValue,
} from "./actors.js";
import { type Assembly, type AssemblyTimers, FAST_TIMERS, startAssembly } from "./assembly.js";
import { DEMO_APPLIERS, DEMO_NAMESPACE, DEMO_WEBHOOK_APP, type PlaygroundApp } from "./demo.js";
import { DEPLOYER_FIELD_MANAGER } from "./deployer.js";

export const FIRST = "blue";
export const SECOND = "green";

/** The appliers that race, each on its own ConfigMap. */
export const RACE_APPS = ["flux", "argocd", "webhook"] as const satisfies readonly PlaygroundApp[];

/**
 * Timers of the race: appliers on one-second timers, and a build/sync delay the race falls into.
 * The deployer's build (4 s) outlasts its GitTarget's commit window (1 s idle), as a CI build
 * outlasts the default 5 s: with the watch plane on, a revert that stays on the cluster for a
 * build's length is a commit of its own, never folded into the apply that undoes it.
 */
export const RACE_TIMERS: AssemblyTimers = {
  ...FAST_TIMERS,
  flux: { ...FAST_TIMERS.flux, buildMs: 1500 },
  // Its own timer finds each new commit: the repo-server's revision cache as short as the refresh
  // (--revision-cache-expiration=1s), as a Git webhook would make it.
  argo: { refreshIntervalMs: 1000, revisionCacheMs: 1000, syncDelayMs: 1500 },
  deployer: { buildMs: 4000 },
  commitIdleSeconds: { webhook: 1 },
  fluxInterval: "1s",
};

export type RaceMode = "own-timers" | "held";

export interface TimelineEntry {
  ms: number;
  text: string;
}

export interface RaceOutcome {
  mode: RaceMode;
  app: PlaygroundApp;
  timeline: TimelineEntry[];
  /** The cluster's greeting at the end, and whether "green" was ever replaced by "blue". */
  cluster: string | undefined;
  reverted: boolean;
  /** The field managers that wrote over "green" (the appliers that reverted it). */
  revertedBy: string[];
  git: string | undefined;
  /** Commits on the branch made by the two saves. */
  commits: number;
  saves: number;
  /** Applies (distinct, in order) the applier completed during the run. */
  applies: string[];
}

const short = (sha: string | undefined) => (sha ? sha.slice(0, 7) : "-");
const APPLIER_NAMES: Record<PlaygroundApp, string> = {
  flux: "kustomize-controller",
  argocd: "argocd-controller",
  webhook: DEPLOYER_FIELD_MANAGER,
};

/** Plays one run of the race on the three apps at once. */
export async function playRace(
  mode: RaceMode,
  opts: {
    log?: Logger;
    redisUrl?: string;
    timers?: AssemblyTimers;
    /**
     * The watch plane mirrors the edits (nobody posts them to the intake API): on the appliers'
     * own timers it also mirrors the revert, as a commit of its own.
     */
    mirror?: boolean;
  } = {},
): Promise<RaceOutcome[]> {
  const a = await startAssembly({
    ...(opts.log ? { log: opts.log } : {}),
    ...(opts.redisUrl ? { redisUrl: opts.redisUrl } : {}),
    timers: opts.timers ?? RACE_TIMERS,
    withoutClaims: mode === "own-timers",
    ...(opts.mirror ? { withMirror: true } : {}),
  });
  try {
    // Each claim holds its applier and the converge at the start applied the tip (a loaded machine
    // stretches the three converges).
    if (mode === "held") {
      await settled(a, 60_000, RACE_APPS);
      await intoTheSecondAfter(await lastCompletion(a));
    } else {
      // Argo CD syncs on its own only what is OutOfSync; with self-heal on (as many teams run it)
      // the edit that differs from the commit it compared is what it syncs over: the edit's change
      // refreshes the Application at once against that commit (CompareWithRecent), before the
      // edit's own commit is resolved.
      await selfHeal(a);
      const head = await tip(a);
      for (const app of RACE_APPS)
        await until(async () => appliedCommits(a, app).includes(head), `${app} to apply the first commit`);
    }
    return await Promise.all(RACE_APPS.map((app) => raceOne(a, mode, app, opts.mirror === true)));
  } finally {
    await a.stop();
  }
}

/** When the last of the appliers' converges at the start completed (ms), from the claims' status. */
async function lastCompletion(a: Assembly): Promise<number> {
  let last = 0;
  for (const app of RACE_APPS) {
    const op = (await readClaim(a, app))?.status?.operation as { completedAt?: string } | undefined;
    last = Math.max(last, Date.parse(op?.completedAt ?? "") || 0);
  }
  return last;
}

/**
 * Waits into the second after `ms`. An applier's write is dated by its managedFields entry, in
 * whole seconds, so an edit made in the same second as a converge's last write cannot be told
 * from one made before it: the worker withholds such a write and asks a Repair (redundant, and
 * by design, see docs/design/decisions.md). The race's edits come after the converges, so they
 * start in a later second; a loaded machine once started them 38 ms after the webhook converge.
 */
async function intoTheSecondAfter(ms: number): Promise<void> {
  const wait = Math.floor(ms / 1000) * 1000 + 1000 - Date.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
}

async function selfHeal(a: Assembly): Promise<void> {
  const custom = a.kubeConfig.makeApiClient(k8s.CustomObjectsApi);
  await custom.patchNamespacedCustomObject(
    {
      group: "argoproj.io",
      version: "v1alpha1",
      plural: "applications",
      namespace: DEMO_APPLIERS.argocd.namespace,
      name: DEMO_APPLIERS.argocd.name,
      body: { spec: { syncPolicy: { automated: { prune: true, selfHeal: true } } } },
    },
    k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
  );
}

async function raceOne(
  a: Assembly,
  mode: RaceMode,
  app: PlaygroundApp,
  mirror: boolean,
): Promise<RaceOutcome> {
  const t0 = Date.now();
  const timeline: TimelineEntry[] = [];
  const note = (text: string) => timeline.push({ ms: Date.now() - t0, text });
  const start = await tip(a);
  const appliedBefore = appliedCommits(a, app).length;
  let seenSecond = false;
  let reverted = false;
  const revertedBy = new Set<string>();

  // The recorder: every value the cluster takes (from a watch: each resourceVersion, however
  // briefly it lived) and every apply the applier completes.
  const samples: ValueSample[] = [];
  const stopWatch = await watchValue(a.kubeConfig, app, samples);
  let last = samples[0]?.value;
  let read = 1;
  let applied = appliedBefore;
  let recording = true;
  const recorder = (async () => {
    while (recording) {
      for (; read < samples.length; read++) {
        const v = samples[read] as ValueSample;
        last = v.value;
        if (v.value === SECOND) seenSecond = true;
        // The later edit reverted: once "green" was on the cluster, an applier wrote anything else.
        const back = seenSecond && v.value !== SECOND && v.manager !== USER_MANAGER;
        if (back) {
          reverted = true;
          revertedBy.add(v.manager ?? "?");
        }
        note(`cluster: ${v.value} (by ${v.manager ?? "?"})${back ? "  ← REVERTED" : ""}`);
      }
      const list = appliedCommits(a, app);
      for (; applied < list.length; applied++) {
        if (list[applied] !== list[applied - 1])
          note(`${APPLIER_NAMES[app]} applied ${short(list[applied])}`);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  })();

  // What the applier has fetched: the deployer on its own trigger fetches each pushed commit of its
  // folder and builds it; held, it only notes the push the Git host announced.
  const fetched = {
    flux: () => fluxArtifactCommit(a),
    argocd: () => argoComparedCommit(a),
    webhook: async () => (mode === "held" ? a.deployer.pushes.at(-1) : a.deployer.fetched()),
  }[app];
  const fetchedNote = {
    flux: "GitRepository fetched",
    argocd: "Argo CD compared",
    webhook: mode === "held" ? "deployer notified of push" : "deployer fetched",
  }[app];
  // With the watch plane on, the edit is made on the cluster alone and its commit is the one the
  // mirror makes; otherwise the edit is reported to the intake API as a save.
  const edit = async (greeting: string) => {
    if (!mirror) return (await apiEdit(a, app, greeting)).body.commit;
    await clusterEdit(a, app, greeting);
    await until(async () => (await gitValue(a, app)) === greeting, `the mirror to commit ${greeting}`);
    return (await commitsTouching(a, start, app)).at(-1);
  };
  const first = { body: { commit: await edit(FIRST) } };
  note(`API edit ${FIRST} → commit ${short(first.body.commit)}`);
  // Both apps race at once, so the applier may fetch a tip holding the other app's commit too.
  const fetchedFirst = await until(async () => {
    const c = await fetched();
    return (await holds(a, c, first.body.commit)) ? c : undefined;
  }, "the applier to fetch the first commit");
  note(`${fetchedNote} ${short(fetchedFirst)}`);
  const second = { body: { commit: await edit(SECOND) } };
  note(`API edit ${SECOND} → commit ${short(second.body.commit)}`);

  if (mode === "own-timers") {
    // Ends once the applier applied the second commit and the cluster shows it.
    await until(
      async () => {
        const list = appliedCommits(a, app);
        return last === SECOND && (await holds(a, list[list.length - 1], second.body.commit));
      },
      "the applier to apply the second commit",
      15_000,
    ).catch((err) => {
      note(`(${errorMessage(err)})`);
    });
  } else {
    // Held: nothing may apply. Watch until the applier has seen the second commit and as long
    // again as an apply would have taken on its own timers.
    await until(
      async () => holds(a, await fetched(), second.body.commit),
      "the applier to fetch the second commit",
    );
    const quietMs =
      (a.timers.flux.buildMs ?? 0) +
      (a.timers.argo.syncDelayMs ?? 0) +
      (a.timers.deployer?.buildMs ?? 0) +
      1000;
    note(`${fetchedNote} ${short(await fetched())}`);
    await new Promise((r) => setTimeout(r, quietMs));
    note(`(watched ${(quietMs / 1000).toFixed(1)}s more: no apply)`);
  }
  recording = false;
  await recorder;
  stopWatch();
  if (mirror && mode === "own-timers") {
    // The mirror records what the applier wrote too: wait for its commit of the revert.
    await until(
      async () => (await commitsTouching(a, start, app)).length > 2,
      "the mirror to record the revert",
      15_000,
    ).catch((err) => note(`(${errorMessage(err)})`));
    note(`Git: ${(await commitsTouching(a, start, app)).length} commits, ends "${await gitValue(a, app)}"`);
  }
  const commits = mirror
    ? await commitsTouching(a, start, app)
    : (await commitsSince(a, start)).filter((c) => c.subject.startsWith(`${app}: `));
  const applies = appliedCommits(a, app)
    .slice(appliedBefore)
    .filter((c, i, all) => c !== all[i - 1]);
  return {
    mode,
    app,
    timeline,
    cluster: (await clusterValue(a, app)).greeting,
    reverted,
    revertedBy: [...revertedBy],
    git: await gitValue(a, app),
    commits: commits.length,
    saves: 2,
    applies,
  };
}

/** The width of each of the two columns on a terminal `columns` wide (80 when unknown). */
export function columnWidth(columns: number | undefined): number {
  return Math.max(30, Math.floor(((columns && columns > 0 ? columns : 80) - 3) / 2));
}

/**
 * Breaks `text` into lines of at most `width`, at spaces where it can; continuation lines are
 * indented by `indent`. Nothing is cut: a marker at the end of an entry stays on the screen.
 */
export function wrap(text: string, width: number, indent = 0): string[] {
  const lines: string[] = [];
  let rest = text;
  let room = width;
  while (rest.length > room) {
    // Never between "←" and its word: a mark reads as one.
    let space = rest.lastIndexOf(" ", room);
    while (space > 0 && rest[space - 1] === "←") space = rest.lastIndexOf(" ", space - 2);
    const at = space > room / 3 ? space : room;
    lines.push(rest.slice(0, at).trimEnd());
    rest = rest.slice(at).trimStart();
    room = width - indent;
  }
  lines.push(rest);
  return lines.map((l, i) => (i === 0 ? l : `${" ".repeat(indent)}${l}`));
}

/** The two timelines of one app side by side, then what each ended with, each line within `width`×2+3. */
export function sideBySide(own: RaceOutcome, held: RaceOutcome, width = columnWidth(80)): string[] {
  const entry = (e: TimelineEntry) =>
    wrap(`${`+${(e.ms / 1000).toFixed(2)}s`.padStart(7)}  ${e.text}`, width, 9);
  const title = {
    flux: `Flux (Kustomization ${DEMO_APPLIERS.flux.namespace}/${DEMO_APPLIERS.flux.name})`,
    argocd: `Argo CD (Application ${DEMO_APPLIERS.argocd.namespace}/${DEMO_APPLIERS.argocd.name})`,
    webhook: `Webhook applier (the playground deployer; held: WebhookClaim ${DEMO_NAMESPACE}/${DEMO_WEBHOOK_APP.claim})`,
  }[own.app];
  const lines = [
    ...wrap(title, width * 2 + 3),
    `${"appliers on their own timers".padEnd(width)} │ held by applygate`,
    `${"─".repeat(width)}─┼─${"─".repeat(width)}`,
  ];
  const rows = (left: string[][], right: string[][]) => {
    for (let i = 0; i < Math.max(left.length, right.length); i++) {
      const [l = [], r = []] = [left[i], right[i]];
      for (let j = 0; j < Math.max(l.length, r.length); j++)
        lines.push(`${(l[j] ?? "").padEnd(width)} │ ${r[j] ?? ""}`.trimEnd());
    }
  };
  rows(own.timeline.map(entry), held.timeline.map(entry));
  const summary = (r: RaceOutcome) => [
    `cluster ends "${r.cluster}"${r.reverted ? `, "${SECOND}" reverted on the way` : ", never reverted"}`,
    `Git ends "${r.git}", ${r.commits} commit(s) for ${r.saves} saves`,
    `applies: ${r.applies.length === 0 ? "none" : r.applies.map(short).join(", ")}`,
  ];
  lines.push(`${"─".repeat(width)}─┼─${"─".repeat(width)}`);
  rows(
    summary(own).map((t) => wrap(t, width, 2)),
    summary(held).map((t) => wrap(t, width, 2)),
  );
  return lines;
}

/** Plays both runs and prints the timelines side by side. */
export async function runRace(opts: {
  log?: Logger;
  redisUrl?: string;
  /** The watch plane mirrors the edits instead of intake calls. */
  mirror?: boolean;
  /** The terminal's width (80 when unknown): the two timelines share it. */
  columns?: number;
  out: (line: string) => void;
}): Promise<{ own: RaceOutcome[]; held: RaceOutcome[] }> {
  opts.out(
    "The two-edit race: two API edits a moment apart, the second right after the applier fetched the first.",
  );
  opts.out("Run 1: the appliers on their own timers (no claims; the deployer builds every push)…");
  const own = await playRace("own-timers", opts);
  opts.out("Run 2: the same edits, the appliers held by applygate…");
  const held = await playRace("held", opts);
  for (const app of RACE_APPS) {
    opts.out("");
    for (const line of sideBySide(
      own.find((r) => r.app === app) as RaceOutcome,
      held.find((r) => r.app === app) as RaceOutcome,
      columnWidth(opts.columns),
    ))
      opts.out(line);
  }
  opts.out("");
  return { own, held };
}
