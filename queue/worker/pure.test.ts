import { describe, expect, it } from "vitest";
import { withGitTimeout } from "../directory.js";
import { branchesWithNews, inBatches, nextStepAt, type SleepInputs } from "./idle.js";
import { WRITE_OVERHEAD_BYTES, writeCharge } from "./intake-budget.js";
import { afterFailure, contentionBackoff, retryDelay } from "./retry.js";
import { publicationConditions } from "./status.js";
import { addToWindow, closesAt, dueWindows, type OpenWindow } from "./windows.js";

describe("retry schedule", () => {
  it("starts at 10 s, doubles, and stays at 5 min; since is the first failure", () => {
    expect([1, 2, 3, 4, 5, 6, 9].map((n) => retryDelay(n))).toEqual([
      10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000,
    ]);
    const a = afterFailure(undefined, 1000, "down");
    const b = afterFailure(a, 11_000, "still down");
    expect(b).toEqual({ since: 1000, failures: 2, nextAt: 31_000, lastCause: "still down" });
  });

  it("jitters contention backoff around a growing base", () => {
    expect(contentionBackoff(0, () => 0)).toBe(25);
    expect(contentionBackoff(0, () => 0.999)).toBeLessThanOrEqual(75);
    expect(contentionBackoff(10, () => 0.5)).toBe(2000);
  });
});

describe("intake budget", () => {
  it("charges a write its payload plus a fixed overhead", () => {
    expect(writeCharge(100)).toBe(100 + WRITE_OVERHEAD_BYTES);
  });
});

describe("commit windows", () => {
  const settings = { idleMs: 5000, maxMs: 60_000 };
  it("close when idle, at the maximum, or at once on a save", () => {
    const ws = new Map<string, OpenWindow<number>>();
    addToWindow(ws, "a", 1, 0, settings, false);
    expect(closesAt(ws.get("a")!)).toBe(5000);
    for (let t = 4000; t <= 64_000; t += 4000) addToWindow(ws, "a", t, t, settings, false);
    expect(closesAt(ws.get("a")!)).toBe(60_000);
    expect(dueWindows(ws, 60_000).map((w) => w.target)).toEqual(["a"]);
  });

  it("a save closes its window at once; the next write opens a new one", () => {
    const ws = new Map<string, OpenWindow<number>>();
    expect(addToWindow(ws, "b", 1, 100, settings, false)).toBeUndefined();
    const saved = addToWindow(ws, "b", 2, 150, settings, true);
    expect(saved?.writes).toEqual([1, 2]);
    expect(ws.has("b")).toBe(false);
    // A write read right after the save (the same inbox read) is not part of the saved commit.
    addToWindow(ws, "b", 3, 150, settings, false);
    expect(ws.get("b")?.writes).toEqual([3]);
  });
});

describe("GitTarget conditions from a publication report", () => {
  const base = { branchKey: "k", intakePaused: false, retainedWrites: 0, retainedBytes: 0 };
  it("maps published, retrying and paused, keeping transition times while a status holds", () => {
    const published = publicationConditions({ ...base, state: "Published", commit: "c" }, undefined, 1000);
    expect(published.map((c) => [c.type, c.status])).toEqual([
      ["Ready", "True"],
      ["Reconciling", "False"],
      ["Stalled", "False"],
    ]);
    const retrying = publicationConditions(
      { ...base, state: "Retrying", retryingSince: 2000, lastError: "503", nextRetryAt: 12_000 },
      published,
      3000,
    );
    expect(retrying.map((c) => [c.type, c.status, c.reason])).toEqual([
      ["Ready", "False", "PublicationRetrying"],
      ["Reconciling", "True", "PublicationRetrying"],
      ["Stalled", "False", "PublicationRetrying"],
    ]);
    expect(retrying[2]?.lastTransitionTime).toBe(published[2]?.lastTransitionTime);
    expect(retrying[0]?.lastTransitionTime).toBe(new Date(3000).toISOString());
    const paused = publicationConditions(
      { ...base, state: "Retrying", retryingSince: 2000, intakePaused: true },
      retrying,
      4000,
    );
    expect(paused[2]).toMatchObject({ status: "True", reason: "IntakePaused" });
  });
});

describe("the Git deadline", () => {
  it("gives every remote the directory resolves the timeout, and leaves unknown branches unknown", async () => {
    const spec = {
      key: "git.example/a@main",
      remote: { url: "https://git.example/a.git" },
      branch: "main",
      targets: [],
    };
    const inner = { branch: async (key: string) => (key === spec.key ? spec : undefined) };
    const d = withGitTimeout(inner, 7_000);
    expect((await d.branch(spec.key))?.remote).toEqual({
      url: "https://git.example/a.git",
      timeoutMs: 7_000,
    });
    expect(await d.branch("git.example/b@main")).toBeUndefined();
    expect(spec.remote).toEqual({ url: "https://git.example/a.git" });
  });
});

describe("a branch worker's next step", () => {
  const idle: SleepInputs = {
    now: 1_000_000,
    pollMs: 1000,
    idlePollMs: 60_000,
    windowDeadline: undefined,
    pendingWrites: 0,
    nextFetchAt: 1_000_000 + 3_600_000,
    retryAt: undefined,
    intakePaused: false,
    autoPublish: true,
    lastPushAt: Number.NEGATIVE_INFINITY,
    pushCooldownMs: 1000,
  };

  it("sleeps an idle branch for the idle period, bounded by its own deadlines", () => {
    expect(nextStepAt(idle)).toBe(idle.now + 60_000);
    expect(nextStepAt({ ...idle, nextFetchAt: idle.now + 5000 })).toBe(idle.now + 5000);
    expect(nextStepAt({ ...idle, windowDeadline: idle.now + 40 })).toBe(idle.now + 40);
    // A pending write waits for the push cooldown, not for the idle period.
    expect(nextStepAt({ ...idle, pendingWrites: 1, lastPushAt: idle.now - 200 })).toBe(idle.now + 800);
    // Publication left to flushes: a pending write sets no deadline of its own.
    expect(nextStepAt({ ...idle, pendingWrites: 1, autoPublish: false })).toBe(idle.now + 60_000);
  });

  it("keeps the short period while publication retries or intake is paused", () => {
    const retrying = { ...idle, retryAt: idle.now + 300_000 };
    expect(nextStepAt(retrying)).toBe(idle.now + 1000);
    expect(nextStepAt({ ...retrying, pendingWrites: 2 })).toBe(idle.now + 1000);
    expect(nextStepAt({ ...idle, intakePaused: true })).toBe(idle.now + 1000);
    // A retry due sooner than the period is the deadline.
    expect(nextStepAt({ ...idle, retryAt: idle.now + 10, pendingWrites: 1 })).toBe(idle.now + 10);
    // Without a pending write, the periodic read waits for the retry (its attempt).
    expect(nextStepAt({ ...idle, retryAt: idle.now + 10, nextFetchAt: idle.now })).toBe(idle.now + 10);
  });

  it("maps the inbox check's answer back to branches, batch by batch", () => {
    const marks = Array.from({ length: 5 }, (_, i) => ({ branchKey: `b${i}`, readTo: "0" }));
    const batches = inBatches(marks, 2);
    expect(batches.map((b) => b.length)).toEqual([2, 2, 1]);
    expect(branchesWithNews(batches, [[2], [], [1]])).toEqual(["b1", "b4"]);
    expect(branchesWithNews(batches, [[], [1, 2]])).toEqual(["b2", "b3"]);
  });
});
