/**
 * A fix after a failed apply, played on the assembly for one applier kind: somebody pushes a
 * commit that makes the apply fail (an object of a kind no cluster serves) and then a commit that
 * removes it, at one of three moments — while the failing operation runs, during the backoff that
 * followed, or once the failure settled and the claim says what it waits for. Shared by the
 * scenario (which asserts the outcomes) and the bench (which prints the fix → applied time).
 */
import { rm } from "node:fs/promises";
import { join } from "node:path";
import * as k8s from "@kubernetes/client-node";
import { type PhaseReport, TERMINAL_PHASES } from "../../queue/contract.js";
import { objectYaml } from "../../queue/git/layout.js";
import { GitPeer } from "../git/peer.js";
import { holds, readClaim, until } from "./actors.js";
import type { Assembly } from "./assembly.js";
import {
  ARGOCD_NAMESPACE,
  DEMO_APPLIERS,
  demoConfigMap,
  demoConfigPath,
  PLAYGROUND_APPS,
  type PlaygroundApp,
} from "./demo.js";
import type { ProgressObserver } from "./progress.js";

export const FIX_TIMINGS = ["during-operation", "during-backoff", "after-settled"] as const;
export type FixTiming = (typeof FIX_TIMINGS)[number];

export interface Pushed {
  sha: string;
  /** When the push started (epoch ms). */
  at: number;
}

export interface Condition {
  type: string;
  status: string;
  reason: string;
  message: string;
}

export interface FixRun {
  app: PlaygroundApp;
  timing: FixTiming;
  broken: Pushed;
  fix: Pushed;
  /** When the applier's first operation for a commit holding the fix was reported Succeeded. */
  appliedAt: number;
  /** From the fix's push to its apply. */
  ms: number;
  /** When the gateway queued the push notice of the fix. */
  noticeAt: number;
  /** When the branch worker sent the applier its first attempt for a commit holding the fix. */
  sentAt: number;
  /** When the last operation for the broken commit ended (0: none ended). */
  brokenEndAt: number;
  /** The claim's Retrying condition just before the fix was pushed. */
  retryingBefore: Condition | undefined;
  /** Reports of operations for the broken commit (not holding the fix), in order. */
  brokenReports: { at: number; report: PhaseReport }[];
}

/**
 * How long the failures before the fix may take: three attempts and two backoffs (2 s, 4 s), each
 * attempt a few seconds on a loaded machine.
 */
const PATIENCE_MS = 120_000;

const CLAIM_APP: Record<string, PlaygroundApp> = {
  FluxClaim: "flux",
  ArgoCDClaim: "argocd",
  WebhookClaim: "webhook",
};

const widgetPath = (app: PlaygroundApp) => `${PLAYGROUND_APPS[app].folder}/widget.yaml`;
const widget = (app: PlaygroundApp) =>
  `apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: broken\n  namespace: ${PLAYGROUND_APPS[app].namespace}\n`;

/** Somebody pushes one commit with the git CLI. */
async function push(
  a: Assembly,
  change: (dir: string, peer: GitPeer) => Promise<void>,
  message: string,
): Promise<Pushed> {
  const peer = await GitPeer.clone(a.demo.repoUrl, a.demo.branch);
  try {
    await change(peer.dir, peer);
    const sha = await peer.commit(message);
    const at = Date.now();
    const out = await peer.push();
    if (!out.ok) throw new Error(`push failed: ${out.stderr}`);
    return { sha, at };
  } finally {
    await peer.remove();
  }
}

/** Phase reports about `app`'s operations, with when each was queued. */
function reportsOf(p: ProgressObserver, app: PlaygroundApp) {
  return p.events.flatMap((e) => (e.type === "phase" && CLAIM_APP[e.report.claim.kind] === app ? [e] : []));
}

/** Reports about operations for a commit holding `broken` and not `fix`. */
export async function brokenReports(
  a: Assembly,
  p: ProgressObserver,
  app: PlaygroundApp,
  broken: string,
  fix?: string,
): Promise<{ at: number; report: PhaseReport }[]> {
  const out: { at: number; report: PhaseReport }[] = [];
  for (const e of reportsOf(p, app)) {
    const c = e.report.commit ?? e.attempt?.commit;
    if ((await holds(a, c, broken)) && !(fix && (await holds(a, c, fix))))
      out.push({ at: e.at.getTime(), report: e.report });
  }
  return out;
}

/** The claim's Retrying condition. */
export async function retryingOf(a: Assembly, app: PlaygroundApp): Promise<Condition | undefined> {
  const claim = await readClaim(a, app);
  return ((claim?.status?.conditions ?? []) as Condition[]).find((c) => c.type === "Retrying");
}

/** Slows the applier's build (Flux's kustomize build, the deployer's) so an operation runs a while. */
function slowBuilds(a: Assembly, app: PlaygroundApp, ms: number): void {
  if (app === "flux") a.flux.knobs.buildMs = ms;
  if (app === "webhook") a.deployer.buildMs = ms;
}

/** Sets the playground Application's `spec.syncPolicy.retry` (null: Argo CD's default again). */
async function argoRetry(a: Assembly, value: unknown): Promise<void> {
  const custom = a.kubeConfig.makeApiClient(k8s.CustomObjectsApi);
  await custom.patchNamespacedCustomObject(
    {
      group: "argoproj.io",
      version: "v1alpha1",
      plural: "applications",
      namespace: ARGOCD_NAMESPACE,
      name: DEMO_APPLIERS.argocd.name,
      body: { spec: { syncPolicy: { retry: value } } },
    },
    k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
  );
}

/**
 * How long a healthy commit takes from its push to its apply on this machine now: a change of the
 * app's demo ConfigMap pushed to Git, until the applier's operation for it is reported Succeeded.
 */
export async function healthyApply(a: Assembly, p: ProgressObserver, app: PlaygroundApp): Promise<number> {
  const pushed = await push(
    a,
    async (_, peer) =>
      peer.writeFile(
        demoConfigPath(app),
        objectYaml(demoConfigMap(app, { greeting: `control-${Date.now()}` })),
      ),
    `${app}: a healthy change`,
  );
  const at = await until(async () => {
    for (const e of reportsOf(p, app))
      if (e.report.phase === "Succeeded" && (await holds(a, e.report.commit, pushed.sha)))
        return e.at.getTime();
    return undefined;
  }, `${app} to apply a healthy commit`);
  return at - pushed.at;
}

/**
 * Pushes the broken commit, waits for `timing`, pushes the fix, and waits until the applier
 * applied it (at most `timeoutMs` after the fix's push).
 */
export async function fixAfterFailure(
  a: Assembly,
  p: ProgressObserver,
  app: PlaygroundApp,
  timing: FixTiming,
  timeoutMs = 60_000,
): Promise<FixRun> {
  const failed = async (sha: string) =>
    (await brokenReports(a, p, app, sha)).filter((e) => e.report.phase === "Failed").length;
  // A team that keeps Argo CD's retry short, so its operation ends and the failure settles.
  if (timing === "after-settled" && app === "argocd")
    await argoRetry(a, { limit: 1, backoff: { duration: "1s", factor: 1 } });
  try {
    const broken = await push(
      a,
      (_, peer) => peer.writeFile(widgetPath(app), widget(app)),
      `${app}: add a Widget no cluster serves`,
    );
    if (timing === "during-operation") {
      if (app !== "argocd") {
        // Three failures first (the next wait is 8 s), then an operation that runs a while: a
        // failing Flux reconcile or deployer build takes a moment (a dry run against the API
        // server), stretched so the fix surely lands while it runs. Argo CD's runs on by itself,
        // in its own retries.
        await until(async () => (await failed(broken.sha)) >= 3, `${app} to fail three times`, PATIENCE_MS);
        slowBuilds(a, app, 1_500);
      }
      const before = (await brokenReports(a, p, app, broken.sha)).length;
      await until(
        async () =>
          (await brokenReports(a, p, app, broken.sha))
            .slice(before)
            .some((e) => e.report.phase === "Running") ||
          (app === "argocd" &&
            (await brokenReports(a, p, app, broken.sha)).some((e) => e.report.phase === "Running")),
        `${app} to start applying the broken commit`,
        PATIENCE_MS,
      );
    } else if (timing === "during-backoff") {
      if (app === "argocd")
        // Argo CD's own retry: the operation waits 10 s, 20 s … between its attempts.
        await until(
          async () => (await retryingOf(a, app))?.reason === "ApplierRetrying",
          "Argo CD to wait for its retry",
          PATIENCE_MS,
        );
      // Three failures: the branch worker's next attempt waits 8 s.
      else
        await until(async () => (await failed(broken.sha)) >= 3, `${app} to fail three times`, PATIENCE_MS);
    } else {
      // Settled: three attempts failed, and the claim says it waits for the fourth.
      await until(
        async () => {
          const r = await retryingOf(a, app);
          return r?.status === "True" && r.reason === "BackingOff" && /attempt 4\b/.test(r.message);
        },
        `${app}'s claim to say it retries the broken commit`,
        PATIENCE_MS,
      );
    }
    const retryingBefore = await retryingOf(a, app);
    const fix = await push(a, (dir) => rm(join(dir, widgetPath(app))), `${app}: remove the Widget`);
    slowBuilds(a, app, 0);
    const appliedAt = await until(
      async () => {
        for (const e of reportsOf(p, app))
          if (e.report.phase === "Succeeded" && (await holds(a, e.report.commit, fix.sha)))
            return e.at.getTime();
        return undefined;
      },
      `${app} to apply the fix ${fix.sha.slice(0, 7)}`,
      timeoutMs,
    );
    const ends = (await brokenReports(a, p, app, broken.sha, fix.sha)).filter((e) =>
      TERMINAL_PHASES.includes(e.report.phase),
    );
    const notice = p.events.find(
      (e) => e.type === "notice" && e.notice.type === "push" && e.notice.after === fix.sha,
    );
    let sentAt = 0;
    for (const e of p.events)
      if (
        e.type === "attempt" &&
        e.attempt.applier.kind === app &&
        (await holds(a, e.attempt.commit, fix.sha))
      ) {
        sentAt = e.at.getTime();
        break;
      }
    return {
      app,
      timing,
      broken,
      fix,
      appliedAt,
      ms: appliedAt - fix.at,
      noticeAt: notice?.at.getTime() ?? fix.at,
      sentAt,
      brokenEndAt: ends.at(-1)?.at ?? 0,
      retryingBefore,
      brokenReports: await brokenReports(a, p, app, broken.sha, fix.sha),
    };
  } finally {
    slowBuilds(a, app, 0);
    if (timing === "after-settled" && app === "argocd") await argoRetry(a, null);
  }
}
