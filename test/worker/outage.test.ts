/**
 * A long Git outage on an injectable clock: writes keep arriving until one would take the branch's
 * charged bytes past the intake budget, intake pauses (the gateway's script refuses and latches),
 * retries follow one schedule (10 s doubling to 5 min), and once the server returns everything
 * publishes and intake resumes.
 */
import { afterEach, describe, expect, it } from "vitest";
import { branchKeys } from "../../queue/keys.js";
import type { BranchWorker } from "../../queue/worker/branch-worker.js";
import { ManualClock } from "../../queue/worker/clock.js";
import { MemoryStatusSink } from "../../queue/worker/status.js";
import { configMapWrite, type Harness, harness, waitFor } from "./harness.js";

describe("a long outage", () => {
  let h: Harness;
  afterEach(async () => {
    await h.close();
  });

  it("pauses intake at the budget, keeps every write, and publishes them all once Git returns", async () => {
    h = await harness(undefined, { idleMs: 5_000, maxMs: 60_000 });
    const clock = new ManualClock(Date.parse("2026-03-01T00:00:00Z"));
    const status = new MemoryStatusSink();
    const worker: BranchWorker = await h.newWorker({ clock, status, budgetBytes: 20 * 1024, pollMs: 1000 });
    /** Lets the worker finish its step (it sleeps on the clock), then moves time on. */
    const settle = () => waitFor("worker asleep", () => clock.waiting() > 0);
    const tick = async (ms: number) => {
      await settle();
      clock.advance(ms);
      await settle();
    };
    await waitFor("baseline", () => worker.snapshot().remoteTip !== undefined);

    h.server.faults.setDown(true);
    const accepted: string[] = [];
    let refused = 0;
    for (let i = 0; i < 200 && refused === 0; i++) {
      const w = configMapWrite(h.key, `cm-${i}`, `v${i}`, { save: true });
      if (await h.accept(w)) {
        accepted.push(w.id);
        worker.wake();
        await waitFor("write read", () => worker.snapshot().retainedWrites === accepted.length);
        await settle();
      } else refused++;
    }
    // The first failure scheduled a retry; the budget (20 KiB at ~1.4 KiB a write) then paused intake.
    const charged = Number(
      (await h.redis.client.hget(branchKeys(h.redis.prefix, h.key).intake, "charged")) ?? 0,
    );
    expect(charged).toBeLessThanOrEqual(20 * 1024);
    expect(charged).toBe(worker.snapshot().retainedBytes);
    expect(refused).toBe(1);
    expect(accepted.length).toBeGreaterThan(10);
    expect(accepted.length).toBeLessThan(20);
    const intake = await h.redis.client.hgetall(branchKeys(h.redis.prefix, h.key).intake);
    expect(intake.paused).toBe("1");
    expect(Number(intake.retryAfter)).toBeGreaterThan(0);
    // The gate latched the pause as it refused; the worker reads the latch on its next step.
    worker.wake();
    const paused = await waitFor("pause reported", () => {
      const s = status.byTarget.get("team/site");
      return s?.intakePaused ? s : undefined;
    });
    expect(paused).toMatchObject({ state: "Retrying", intakePaused: true, retainedWrites: accepted.length });
    const since = paused?.retryingSince;

    // Thirty minutes of outage: the schedule doubles from 10 s and stays at 5 min.
    const gaps: number[] = [];
    let lastNext = worker.snapshot().nextRetryAt as number;
    for (let t = 0; t < 30 * 60_000; t += 5_000) {
      await tick(5_000);
      const next = worker.snapshot().nextRetryAt as number;
      if (next !== lastNext) {
        gaps.push(next - clock.now());
        lastNext = next;
      }
    }
    expect(gaps.slice(0, 5)).toEqual([20_000, 40_000, 80_000, 160_000, 300_000]);
    expect(gaps.at(-1)).toBe(300_000);
    expect(status.byTarget.get("team/site")?.retryingSince).toBe(since);
    expect(await h.accept(configMapWrite(h.key, "late", "x"))).toBe(false);
    for (const id of accepted) expect(await h.published(id)).toBeNull();

    h.server.faults.setDown(false);
    await tick(300_000);
    await waitFor("all published", async () => {
      for (const id of accepted) if (!(await h.published(id))) return false;
      return true;
    });
    // The latch is released and every charge given back; the budget stays for the gate.
    await waitFor("intake released", async () => {
      const i = await h.redis.client.hgetall(branchKeys(h.redis.prefix, h.key).intake);
      return i.paused === undefined && i.charged === undefined;
    });
    expect(await h.redis.client.hgetall(branchKeys(h.redis.prefix, h.key).intake)).toEqual({
      budget: String(20 * 1024),
    });
    expect(status.byTarget.get("team/site")).toMatchObject({
      state: "Published",
      intakePaused: false,
      retainedWrites: 0,
    });
    // One commit per save, each write exactly once.
    expect((await h.log()).length).toBe(accepted.length + 1);
    expect(await h.accept(configMapWrite(h.key, "after", "y"))).toBe(true);
  });
});
