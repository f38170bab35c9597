/**
 * A fix after a failed apply goes out at once. Somebody pushes a commit that makes the apply fail
 * (an object of a kind no cluster serves) and then a commit that removes it: for each applier
 * kind — Flux, Argo CD, the webhook deployer — the fix is applied within 5 s of its push, at the
 * playground's timers, whether it is pushed while the failing operation runs, during the backoff
 * that followed, or once the failure settled and the claim says what it waits for. The broken
 * commit is never reported applied; an Argo CD operation still retrying it is ended Superseded.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TERMINAL_PHASES } from "../../queue/contract.js";
import { DEFAULT_KNOBS } from "../cluster/fluxsim/index.js";
import { appliedCommits, holds, readClaim, until } from "../playground/actors.js";
import { PLAYGROUND_TIMERS } from "../playground/assembly.js";
import {
  FIX_TIMINGS,
  type FixRun,
  fixAfterFailure,
  healthyApply,
  retryingOf,
} from "../playground/fix-after-failure.js";
import { formatProgress, observeProgress, type ProgressObserver } from "../playground/progress.js";
import { type Scene, startScene } from "./harness.js";

/** The goal: the fix applied within this long of its push. */
const GOAL_MS = 5_000;
/**
 * What a healthy commit's apply takes on a quiet machine (push → Succeeded: about 1 s). On a
 * loaded one every step is slower, applygate's and the simulated appliers' alike: the goal is
 * stretched by what a healthy apply takes beyond this, measured just before (`healthyApply`).
 */
const QUIET_APPLY_MS = 1_500;
/** Once it knows of the fix and the applier is free, the branch worker sends it at once. */
const SEND_MS = 1_500;
/** Each case waits for several failures first (a minute or two on a loaded machine). */
const CASE_MS = 300_000;

let s: Scene;
let p: ProgressObserver;
beforeAll(async () => {
  // The playground's own timers, Flux's defaults included.
  s = await startScene({ timers: { ...PLAYGROUND_TIMERS, flux: { ...DEFAULT_KNOBS } } });
  p = await observeProgress({
    redisUrl: s.a.redis.url,
    prefix: s.a.prefix,
    kinds: ["flux", "argocd", "webhook"],
  });
}, 120_000);
afterAll(async () => {
  await p?.stop();
  await s?.stop();
}, 60_000);

/** What the user sees once the fix is applied; the times last, so a slow run still says what it saw. */
async function expectFixApplied(run: FixRun) {
  const { app, fix } = run;
  const healthy = await healthyApply(s.a, p, app);
  if (process.env.FIX_TRACE)
    for (const e of p.events)
      if (e.at.getTime() >= fix.at - 3000 && e.at.getTime() <= run.appliedAt + 100)
        process.stdout.write(`${e.at.getTime() - fix.at} ${formatProgress(e)}\n`);
  // The cluster runs the fix: the applier applied a commit holding it, and the claim says so.
  const hits = await Promise.all(appliedCommits(s.a, app).map((c) => holds(s.a, c, fix.sha)));
  expect(hits.some(Boolean), `${app} applied a commit holding the fix`).toBe(true);
  const claim = await readClaim(s.a, app);
  expect(await holds(s.a, claim?.status?.lastAppliedCommit as string, fix.sha)).toBe(true);
  // The broken commit was never reported applied.
  expect(run.brokenReports.filter((e) => e.report.phase === "Succeeded")).toEqual([]);
  // Nothing waits for a retry any more.
  await until(async () => (await retryingOf(s.a, app))?.status !== "True", `${app}'s Retrying to clear`);
  process.stdout.write(
    `${app}, fix pushed ${run.timing}: applied after ${run.ms} ms (a healthy commit: ${healthy} ms)\n`,
  );
  // Nothing held it: sent as soon as the worker knew of it and no operation for the broken commit ran.
  const free = Math.max(run.noticeAt, run.brokenEndAt);
  expect(run.sentAt - free, `${app}: sent ${run.sentAt - free} ms after the applier was free`).toBeLessThan(
    SEND_MS,
  );
  const goal = GOAL_MS + Math.max(0, healthy - QUIET_APPLY_MS);
  // An Argo CD operation still retrying the broken commit was ended soon after the fix's notice.
  if (app === "argocd" && run.brokenEndAt > run.noticeAt)
    expect(run.brokenEndAt - run.noticeAt, "the superseded operation ended after the notice").toBeLessThan(
      goal,
    );
  expect(run.ms, `${app}: the fix applied ${run.ms} ms after its push (goal ${goal} ms)`).toBeLessThan(goal);
}

const short = (sha: string) => sha.slice(0, 7);

describe.each(["flux", "argocd", "webhook"] as const)("%s: a fix after a failed apply", (app) => {
  const [during, backoff, settled] = FIX_TIMINGS;

  it(
    "pushed while the failing operation runs, is applied within 5 s",
    async () => {
      const run = await fixAfterFailure(s.a, p, app, during);
      const ends = run.brokenReports.filter((e) => TERMINAL_PHASES.includes(e.report.phase));
      // It was pushed while the operation ran: that operation ended after the push.
      expect(ends.at(-1)?.at ?? 0).toBeGreaterThan(run.fix.at);
      // Argo CD's, retrying the broken commit, is ended by the fix; the others end by themselves.
      expect(ends.at(-1)?.report.phase).toBe(app === "argocd" ? "Superseded" : "Failed");
      await expectFixApplied(run);
    },
    CASE_MS,
  );

  it(
    "pushed during the backoff that followed, is applied within 5 s",
    async () => {
      const run = await fixAfterFailure(s.a, p, app, backoff);
      if (app === "argocd") {
        // The claim said which of Argo CD's own attempts came next, of how many, and when.
        expect(run.retryingBefore?.message).toMatch(
          new RegExp(`^Argo CD retries ${short(run.broken.sha)} in \\d+ s \\(at .+\\), attempt 2 of 6`),
        );
        expect(run.brokenReports.at(-1)?.report.phase).toBe("Superseded");
      }
      await expectFixApplied(run);
    },
    CASE_MS,
  );

  it(
    "pushed once the failure settled and the claim says what it waits for, is applied within 5 s",
    async () => {
      const run = await fixAfterFailure(s.a, p, app, settled);
      expect(run.retryingBefore).toMatchObject({ status: "True", reason: "BackingOff" });
      expect(run.retryingBefore?.message).toMatch(
        new RegExp(
          `^retrying ${short(run.broken.sha)} in \\d+ s \\(at .+\\), attempt 4 .*the last attempt ended Failed`,
        ),
      );
      await expectFixApplied(run);
    },
    CASE_MS,
  );
});
