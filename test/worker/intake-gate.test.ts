/**
 * The intake gate charges a write as it accepts it, in the same Redis step as the pause check, so
 * what arrives while the worker is blocked on a slow Git call is counted at once. Notices, the
 * worker's own timers and shutdown never pass the gate.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { AcceptedWrite, PushNotice, RefusalNotice } from "../../queue/contract.js";
import { appendNotice, writeCharge } from "../../queue/intake.js";
import { branchKeys } from "../../queue/keys.js";
import { ManualClock } from "../../queue/worker/clock.js";
import { type FetchReason, noMetrics } from "../../queue/worker/metrics.js";
import { configMapWrite, type Harness, harness, TARGET, waitFor } from "./harness.js";

const BUDGET = 20 * 1024;

const chargeOf = (w: AcceptedWrite) => writeCharge(Buffer.byteLength(JSON.stringify(w)));

describe("the intake gate", () => {
  let h: Harness;
  afterEach(async () => {
    await h.close();
  });

  const intake = () => h.redis.client.hgetall(branchKeys(h.redis.prefix, h.key).intake);

  /** Accepts saves without waiting for the worker: what the gateway does while the worker is blocked. */
  const acceptMany = async (n: number) => {
    const accepted: AcceptedWrite[] = [];
    let refused = 0;
    for (let i = 0; i < n; i++) {
      const w = configMapWrite(h.key, `cm-${i}`, `v${i}`, { save: true });
      if (await h.accept(w)) accepted.push(w);
      else refused++;
    }
    return { accepted, refused };
  };

  it("writes accepted while a publication retry stalls at the remote never take the branch past its budget", async () => {
    h = await harness(undefined, { idleMs: 5_000, maxMs: 60_000 });
    const clock = new ManualClock(Date.parse("2026-03-01T00:00:00Z"));
    const worker = await h.newWorker({ clock, budgetBytes: BUDGET, pollMs: 1000 });
    await waitFor("baseline", () => worker.snapshot().remoteTip !== undefined);
    h.server.faults.setDown(true);
    const first = configMapWrite(h.key, "first", "0", { save: true });
    expect(await h.accept(first)).toBe(true);
    worker.wake();
    await waitFor("retry scheduled", () => worker.snapshot().nextRetryAt !== undefined);
    await waitFor("the gate knows a retry is pending", async () => (await intake()).retrying === "1");

    // The retry is due and its push stalls: the worker is blocked inside one Git call.
    h.server.faults.setDown(false);
    const stall = h.server.faults.stallNext(1, "push");
    const pushes = h.server.counts().push;
    await waitFor("worker asleep", () => clock.waiting() > 0);
    clock.advance(10_000);
    await waitFor("the retry's push is at the remote", () => h.server.counts().push > pushes);

    const { accepted, refused } = await acceptMany(100);
    const charged = [first, ...accepted].reduce((n, w) => n + chargeOf(w), 0);
    expect(refused).toBeGreaterThan(0);
    expect(charged).toBeLessThanOrEqual(BUDGET);
    expect(await intake()).toMatchObject({ paused: "1", charged: String(charged) });

    // The push lands: the latch is released, and every accepted write publishes.
    stall.release();
    await waitFor("first published", () => h.published(first.id));
    worker.wake();
    await waitFor("all published", async () => {
      for (const w of accepted) if (!(await h.published(w.id))) return false;
      return true;
    });
    await waitFor("every charge given back", async () => {
      const i = await intake();
      return i.charged === undefined && i.paused === undefined;
    });
    expect(await h.accept(configMapWrite(h.key, "after", "y"))).toBe(true);
  });

  it("a healthy branch blocked on a stalled push refuses what would pass its budget, without latching the pause", async () => {
    h = await harness(undefined, { idleMs: 20, maxMs: 100 });
    const worker = await h.newWorker({ budgetBytes: BUDGET });
    await waitFor("baseline", () => worker.snapshot().remoteTip !== undefined);
    await waitFor("the gate knows the budget", async () => (await intake()).budget === String(BUDGET));
    const stall = h.server.faults.stallNext(1, "push");
    const first = configMapWrite(h.key, "first", "0", { save: true });
    expect(await h.accept(first)).toBe(true);
    await waitFor("the push is at the remote", () => h.server.counts().push > 0);

    const { accepted, refused } = await acceptMany(100);
    const charged = [first, ...accepted].reduce((n, w) => n + chargeOf(w), 0);
    expect(refused).toBeGreaterThan(0);
    expect(charged).toBeLessThanOrEqual(BUDGET);
    const held = await intake();
    expect(held.paused).toBeUndefined();
    expect(held.charged).toBe(String(charged));

    stall.release();
    await waitFor("all published", async () => {
      for (const w of [first, ...accepted]) if (!(await h.published(w.id))) return false;
      return true;
    });
    await waitFor("every charge given back", async () => (await intake()).charged === undefined);
    expect(await h.accept(configMapWrite(h.key, "after", "y"))).toBe(true);
  });

  it("the charged count stays exact: a retried copy of a held write gives its charge back at once, and a new owner rebuilds a count gone wrong", async () => {
    h = await harness(undefined, { idleMs: 60_000, maxMs: 60_000 });
    const worker = await h.newWorker({ budgetBytes: BUDGET, autoPublish: false });
    const w = configMapWrite(h.key, "a", "1");
    expect(await h.accept(w)).toBe(true);
    // The client retries the same write (its answer was lost): a second entry, charged again.
    expect(await h.accept(w)).toBe(true);
    worker.wake();
    await waitFor("the copy left the inbox", async () => (await h.inboxLength()) === 1);
    await waitFor("its charge given back", async () => (await intake()).charged === String(chargeOf(w)));
    expect(worker.snapshot().retainedWrites).toBe(1);

    // The count is off (an entry removed by hand, say); the next owner counts the inbox again.
    await h.redis.client.hset(branchKeys(h.redis.prefix, h.key).intake, "charged", "999999");
    await worker.stop();
    await h.redis.client.del(branchKeys(h.redis.prefix, h.key).lease);
    const next = await h.newWorker({ replica: "r2", budgetBytes: BUDGET, autoPublish: false });
    await waitFor("recounted", async () => (await intake()).charged === String(chargeOf(w)));
    expect((await next.flush()).ok).toBe(true);
    expect(await h.published(w.id)).toMatch(/^[0-9a-f]{40}$/);
    await waitFor("nothing charged", async () => (await intake()).charged === undefined);
  });

  it("a paused, over-budget branch still takes a push notice, a refusal notice and its retry tick, and stops at once", async () => {
    h = await harness(undefined, { idleMs: 5_000, maxMs: 60_000 });
    const clock = new ManualClock(Date.parse("2026-03-01T00:00:00Z"));
    const fetches: FetchReason[] = [];
    const refusals: string[] = [];
    const worker = await h.newWorker({
      clock,
      budgetBytes: BUDGET,
      pollMs: 1000,
      metrics: { ...noMetrics, fetch: (_b, reason) => void fetches.push(reason) },
      hooks: { onRefusal: (n) => void refusals.push(n.id) },
    });
    await waitFor("baseline", () => worker.snapshot().remoteTip !== undefined);
    h.server.faults.setDown(true);
    const first = configMapWrite(h.key, "first", "0", { save: true });
    await h.accept(first);
    worker.wake();
    await waitFor("the gate knows a retry is pending", async () => (await intake()).retrying === "1");
    const { accepted, refused } = await acceptMany(100);
    expect(refused).toBeGreaterThan(0);
    worker.wake();
    await waitFor("the worker sees the pause", () => worker.snapshot().intakePaused);
    const inbox = branchKeys(h.redis.prefix, h.key).inbox;
    const writes = 1 + accepted.length;
    await waitFor("every write held", () => worker.snapshot().retainedWrites === writes);

    // Notices are appended outside the gate and handled while the branch is paused.
    const push: PushNotice = {
      type: "push",
      provider: TARGET,
      deliveryId: "d-1",
      repository: [h.url],
      branch: "main",
      before: "0".repeat(40),
      after: "1".repeat(40),
      deleted: false,
      forced: false,
      receivedAt: new Date().toISOString(),
      branchKeys: [h.key],
    };
    const refusal: RefusalNotice = {
      type: "refusal",
      id: "refusal-1",
      target: TARGET,
      branchKey: h.key,
      receivedAt: new Date().toISOString(),
      object: { apiVersion: "v1", kind: "ConfigMap", namespace: "web", name: "first" },
      reason: "field owned by a policy",
    };
    await appendNotice(h.redis.client, h.redis.prefix, h.key, "push", push);
    await appendNotice(h.redis.client, h.redis.prefix, h.key, "refusal", refusal);
    expect(await h.redis.client.xlen(inbox)).toBe(writes + 2);
    worker.wake();
    await waitFor("both notices taken", async () => (await h.redis.client.xlen(inbox)) === writes);
    expect(refusals).toEqual(["refusal-1"]);

    // The retry tick still fires: it reads the remote the push notice asked for (failing while down).
    const failures = worker.snapshot().nextRetryAt;
    const pushes = h.server.counts().push;
    await waitFor("worker asleep", () => clock.waiting() > 0);
    clock.advance(10_000);
    await waitFor("the retry ran", () => worker.snapshot().nextRetryAt !== failures);
    expect(fetches).toContain("notice");
    // One attempt per tick: the failed read was it, no push is spent on top.
    expect(h.server.counts().push).toBe(pushes);
    expect(worker.snapshot().intakePaused).toBe(true);

    // Shutdown while the next retry's push stalls at the remote: it ends at once and keeps everything.
    h.server.faults.setDown(false);
    h.server.faults.stallNext(1, "push");
    const stalledAt = h.server.counts().push;
    await waitFor("worker asleep", () => clock.waiting() > 0);
    clock.advance(20_000);
    await waitFor("the push is at the remote", () => h.server.counts().push > stalledAt);
    let stopped = false;
    const stopping = worker.stop().then(() => {
      stopped = true;
    });
    await waitFor("stopped", () => stopped, 5_000);
    await stopping;
    expect(await h.redis.client.xlen(inbox)).toBe(writes);
    expect(await h.published(first.id)).toBeNull();
    expect((await intake()).paused).toBe("1");
  });
});
