/**
 * The queue dashboard in a real browser (Chromium through playwright-core), as the gateway serves
 * it in the playground: read-only, behind basic auth. A person opens it, finds a failed apply and
 * a stuck one, and reads what they need; no button changes anything in Redis; the page asks for
 * nothing from any other host. With DOCS_SCREENSHOTS=1 (`npm run docs:screenshots`) it writes
 * the screenshots docs/operations.md shows.
 */
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { Queue } from "bullmq";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { applygateQueueNames } from "../../gateway/app.js";
import { attemptJobName } from "../../queue/attempt-job.js";
import { type Attempt, TERMINAL_PHASES } from "../../queue/contract.js";
import { bullConnection } from "../../queue/redis.js";
import { foreignPush, until } from "../playground/actors.js";
import { FAST_TIMERS } from "../playground/assembly.js";
import { DEMO_APPLIERS } from "../playground/demo.js";
import { CHROMIUM, type LoopbackBrowser, launchChromium } from "../support/chromium.js";
import { type Scene, startScene } from "./harness.js";

const SCREENSHOTS = process.env.DOCS_SCREENSHOTS === "1";
const IMAGES = join(import.meta.dirname, "../../docs/images");

const STATES = [
  "waiting",
  "active",
  "delayed",
  "failed",
  "completed",
  "prioritized",
  "waiting-children",
] as const;

/** What the queues hold, as far as a button could change it: each job's state, run and end; pauses. */
async function queueState(queues: Queue[]): Promise<string> {
  const out: Record<string, unknown> = {};
  for (const q of queues) {
    const jobs: Record<string, unknown> = {};
    for (const state of STATES)
      for (const j of await q.getJobs([state], 0, -1))
        if (j)
          jobs[j.id as string] = {
            state,
            name: j.name,
            attemptsMade: j.attemptsMade,
            failedReason: j.failedReason,
            finishedOn: j.finishedOn,
            returnvalue: j.returnvalue,
            data: j.data,
          };
    out[q.name] = { paused: await q.isPaused(), jobs };
  }
  return JSON.stringify(out);
}

/**
 * The label of each visible button on the page (text, title, aria-label): distinct ones, or with
 * `all` one entry per button element of the page in document order (hidden ones as "").
 */
async function buttonLabels(page: Page, all = false): Promise<string[]> {
  const labels = await page.locator("button").evaluateAll((buttons) =>
    buttons.map((b) => {
      // Runs in the page: a DOM element, typed here as far as it is read.
      const e = b as unknown as {
        offsetParent: unknown;
        innerText: string;
        title: string;
        getAttribute(n: string): string | null;
      };
      if (!e.offsetParent) return "";
      return (
        [e.innerText.trim(), e.title, e.getAttribute("aria-label") ?? ""].filter(Boolean).join(" ") ||
        "(icon)"
      );
    }),
  );
  return all ? labels : [...new Set(labels.filter(Boolean))];
}

/** The card of a job on a queue's page, found by the name a person reads. */
const cardOf = (page: Page, name: string) =>
  page.locator("[class^='card-']").filter({ has: page.getByRole("heading", { name, exact: true }) });

describe.skipIf(!CHROMIUM)("the queue dashboard in a browser", () => {
  let s: Scene;
  let chrome: LoopbackBrowser;
  let queues: Queue[];
  let release = () => {};
  let failed: { attempt: Attempt; reason: string };
  let stuck: Attempt;

  beforeAll(async () => {
    // An Argo CD operation is Unresolved a second after its sync starts (5 minutes by default).
    s = await startScene({
      timers: {
        sidecar: { ...FAST_TIMERS.sidecar, argocd: { ...FAST_TIMERS.sidecar.argocd, budgetMs: 1_000 } },
      },
    });
    chrome = await launchChromium();
    queues = applygateQueueNames().map(
      (name) => new Queue(name, { connection: bullConnection(s.a.redis.url), prefix: s.a.prefix }),
    );
    const attempts = () => s.progress.attempts().slice(s.before);
    const phasesOf = (token: string) =>
      s.progress
        .phases()
        .filter((p) => p.token === token)
        .map((p) => p.phase);

    // A Flux apply that fails: the Kustomization's build breaks once; the worker retries it.
    s.a.flux.failNextApply(DEMO_APPLIERS.flux, "build");
    await foreignPush(s.a, "flux", "broken");
    const broken = await until(
      () => attempts().find((a) => a.applier.kind === "flux" && phasesOf(a.token).includes("Failed")),
      "a Flux apply to fail",
      60_000,
    );
    const report = s.progress.phases().find((p) => p.token === broken.token && p.phase === "Failed");
    failed = { attempt: broken, reason: report?.reason ?? "" };
    await until(
      () => attempts().some((a) => a.applier.kind === "flux" && phasesOf(a.token).includes("Succeeded")),
      "the worker's retry to apply",
      60_000,
    );

    // An Argo CD sync that does not end: past its deadline, the operation is Unresolved (stuck).
    const hold = s.a.argo.holdSync(DEMO_APPLIERS.argocd);
    release = () => hold.release();
    await foreignPush(s.a, "argocd", "slow");
    stuck = await until(
      () =>
        // The one held, not an earlier sync that outlasted the short deadline under load and ended.
        attempts().find(
          (a) =>
            a.applier.kind === "argocd" &&
            phasesOf(a.token).includes("Unresolved") &&
            !phasesOf(a.token).some((p) => TERMINAL_PHASES.includes(p)),
        ),
      "an Argo CD operation to go Unresolved",
      60_000,
    );
  }, 240_000);

  afterAll(async () => {
    release();
    await chrome?.close();
    for (const q of queues ?? []) await q.close();
    await s?.stop();
  });

  it("refuses a wrong password, and a visit without one, with 401", async () => {
    const wrong = await chrome.context({ username: s.a.dashboard.user, password: "not-the-password" });
    const page = await wrong.newPage();
    expect((await page.goto(s.a.dashboard.url))?.status()).toBe(401);
    await wrong.close();
    // Without credentials the browser would ask for them; the answer it got is read directly.
    const none = await chrome.context();
    expect((await none.request.get(s.a.dashboard.url)).status()).toBe(401);
    await none.close();
  });

  it("lists every queue with its counts, a failed apply and a stuck one can be found and read, and no button changes anything", async () => {
    const ctx = await chrome.context({ username: s.a.dashboard.user, password: s.a.dashboard.password });
    const page = await ctx.newPage();
    const refused: string[] = [];
    page.on("console", (m) => {
      if (/Content Security Policy/.test(m.text())) refused.push(m.text());
    });
    expect((await page.goto(s.a.dashboard.url))?.status()).toBe(200);

    // Every queue, on the sidebar and as a card with the counts Redis holds.
    await until(async () => {
      for (const q of queues) {
        const counts = await q.getJobCounts("active", "waiting", "delayed", "failed", "completed");
        const total = Object.values(counts).reduce((a, b) => a + b, 0);
        const card = page
          .locator("[class*='queueCard-']")
          .filter({ has: page.locator(`a[title="${q.name}"]`) });
        const text = (await card.innerText({ timeout: 1_000 })).replace(/\s+/g, " ");
        if (!text.includes(`${total} Jobs`)) return false;
        for (const state of ["active", "waiting", "delayed", "failed"] as const) {
          const n = counts[state] ?? 0;
          if (n > 0 && !text.includes(`${state.toUpperCase()} ${n}`)) return false;
        }
      }
      return true;
    }, "every queue's card to show what Redis counts");
    const sidebar = page.locator("#bull-board-sidebar");
    for (const q of queues)
      await expect(sidebar.getByRole("link", { name: q.name, exact: true }).isVisible()).resolves.toBe(true);
    if (SCREENSHOTS) {
      await mkdir(IMAGES, { recursive: true });
      await page.screenshot({ path: join(IMAGES, "dashboard-queues.png") });
    }

    // The failed Flux apply: its queue, the Failed tab, its card named for branch, applier, commit.
    await sidebar.getByRole("link", { name: "attempts-flux", exact: true }).click();
    await page.getByRole("link", { name: /^FAILED/ }).click();
    const failedCard = cardOf(page, attemptJobName(failed.attempt));
    await failedCard.waitFor();
    await failedCard.getByRole("tab", { name: "Error" }).click();
    const failedText = await failedCard.innerText();
    expect(failed.reason).not.toBe("");
    expect(failedText).toContain(failed.attempt.branchKey);
    expect(failedText).toContain("flux/flux-system/flux-app");
    expect(failedText).toContain(failed.attempt.commit.slice(0, 12));
    expect(failedText).toContain(`Failed: ${failed.reason}`);
    expect(failedText).toContain("injected build failure");

    // The stuck Argo CD apply: Active, and its progress and log say stuck, with the reason.
    await sidebar.getByRole("link", { name: "attempts-argocd", exact: true }).click();
    await page.getByRole("link", { name: /^ACTIVE/ }).click();
    const stuckCard = cardOf(page, attemptJobName(stuck));
    await stuckCard.waitFor();
    const stuckHead = await stuckCard.innerText();
    expect(stuckHead).toContain(stuck.branchKey);
    expect(stuckHead).toContain("argocd/argocd/argo-app");
    expect(stuckHead).toContain(stuck.commit.slice(0, 12));
    await stuckCard.getByRole("tab", { name: "Progress" }).click();
    await until(
      async () => /"?stuck"?:\s*true/.test(await stuckCard.innerText()),
      "the progress to say stuck",
    );
    expect(await stuckCard.innerText()).toMatch(/Unresolved/);
    await stuckCard.getByRole("tab", { name: "Logs" }).click();
    await until(
      async () => /STUCK Unresolved — \S+/.test(await stuckCard.innerText()),
      "the log to say stuck, and why",
    );
    if (SCREENSHOTS) await page.screenshot({ path: join(IMAGES, "dashboard-stuck-attempt.png") });

    // Read-only: no button offers a change, and pressing every one changes nothing in Redis.
    const before = await until(async () => {
      const a = await queueState(queues);
      await new Promise((r) => setTimeout(r, 500));
      return a === (await queueState(queues)) ? a : false;
    }, "the queues to be quiet");
    // The overview, each queue's page, and the pages holding the failed and the stuck job.
    const pages = [
      s.a.dashboard.url,
      ...queues.map((q) => `${s.a.dashboard.url}/queue/${q.name}`),
      `${s.a.dashboard.url}/queue/attempts-flux?status=failed`,
      `${s.a.dashboard.url}/queue/attempts-flux?status=completed`,
      `${s.a.dashboard.url}/queue/attempts-argocd?status=active`,
    ];
    let pressed = 0;
    const labels = new Set<string>();
    const opened = async (url: string) => {
      await page.goto(url);
      await page.locator("#bull-board-sidebar").waitFor();
      await page
        .locator("main [class*='card-']")
        .first()
        .waitFor({ timeout: 5_000 })
        .catch(() => {});
    };
    for (const url of pages) {
      await opened(url);
      // One press per kind of button on the page (each job card repeats its tabs).
      for (const label of await buttonLabels(page)) {
        if (page.url() !== url) await opened(url);
        const index = (await buttonLabels(page, true)).indexOf(label);
        if (index < 0) continue;
        labels.add(label);
        await page
          .locator("button")
          .nth(index)
          .click({ timeout: 2_000 })
          .catch(() => {});
        pressed++;
        // A confirmation a button asked for is confirmed, as a person who clicked on would.
        for (const confirm of await page.getByRole("button", { name: /^(confirm|ok|yes)$/i }).all())
          await confirm.click({ timeout: 1_000 }).catch(() => {});
        await page.keyboard.press("Escape");
      }
    }
    expect(pressed).toBeGreaterThan(20);
    for (const label of labels)
      expect(label, `a button offering a change: ${label}`).not.toMatch(
        /retry|clean|promote|remove|pause|resume|add job|duplicate|empty|obliterate|delete|discard|update/i,
      );
    await new Promise((r) => setTimeout(r, 500));
    expect(await queueState(queues)).toBe(before);

    // Nothing came from another host (bull-board's page names a web font on one; the CSP refuses it).
    expect(chrome.offLoopback).toEqual([]);
    // What the policy refused is that font alone: nothing the board itself needs.
    expect(refused.length).toBeGreaterThan(0);
    for (const line of refused) expect(line).toContain("https://fonts.googleapis.com/");
    await ctx.close();
  }, 240_000);
});
