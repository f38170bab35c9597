/**
 * Deadlines against a stalled remote: a publication cycle gives up when its overall deadline
 * passes, in the middle of a Git call or between two, and that counts as a failure on the one
 * retry schedule (10 s first) with every pending write kept. Stopping the worker ends a stalled
 * call at once.
 */
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { branchKeys } from "../../queue/keys.js";
import { ManualClock } from "../../queue/worker/clock.js";
import { RETRY_INITIAL_MS } from "../../queue/worker/retry.js";
import { foreignCommit } from "./foreign.js";
import { configMapWrite, fileOf, type Harness, harness, waitFor } from "./harness.js";

describe("publication deadlines", () => {
  let h: Harness;
  afterEach(async () => {
    await h.close();
  });

  /** The branch's spec with a per-call deadline far beyond the cycle's. */
  const patientCalls = () => ({ ...h.spec, remote: { ...h.spec.remote, timeoutMs: 120_000 } });

  /** Stops the owner, gives its lease back, and lets a fresh owner with default deadlines publish. */
  const nextOwnerPublishes = async (worker: { stop(): Promise<void> }, id: string) => {
    await worker.stop();
    await h.redis.client.del(branchKeys(h.redis.prefix, h.key).lease);
    await h.newWorker({ replica: "r2" });
    return waitFor("published by the next owner", () => h.published(id));
  };

  it("a push stalled past its call's deadline fails onto the retry schedule and loses nothing", async () => {
    h = await harness(undefined, { idleMs: 20, maxMs: 100 });
    const clock = new ManualClock(Date.parse("2026-03-01T00:00:00Z"));
    const spec = { ...h.spec, remote: { ...h.spec.remote, timeoutMs: 1000 } };
    const worker = await h.newWorker({ clock, spec, pollMs: 1000 });
    await waitFor("baseline", () => worker.snapshot().remoteTip !== undefined);
    h.server.faults.stallNext(1, "push");
    const w = configMapWrite(h.key, "a", "1", { save: true });
    await h.accept(w);
    worker.wake();
    const failed = await waitFor("the push failed", () => worker.snapshot().lastCause);
    // The push's own error, or the tip probe's after it, should the probe be slow as well.
    expect(failed).toMatch(/^no answer from .* within 1000 ms$/);
    expect(h.server.counts().push).toBe(1);
    expect(worker.snapshot()).toMatchObject({
      nextRetryAt: clock.now() + RETRY_INITIAL_MS,
      retainedWrites: 1,
      pendingWrites: 1,
    });
    expect(await h.published(w.id)).toBeNull();
    expect(await h.inboxLength()).toBe(1);
    const commit = await nextOwnerPublishes(worker, w.id);
    expect(await h.server.tip("site")).toBe(commit);
  });

  it("a push under way when the cycle's deadline passes is abandoned, fails onto the retry schedule, and loses nothing", async () => {
    h = await harness(undefined, { idleMs: 20, maxMs: 100 });
    const clock = new ManualClock(Date.parse("2026-03-01T00:00:00Z"));
    const worker = await h.newWorker({ clock, spec: patientCalls(), pushCycleTimeoutMs: 2000, pollMs: 1000 });
    await waitFor("baseline", () => worker.snapshot().remoteTip !== undefined);
    h.server.faults.stallNext(1, "push");
    const w = configMapWrite(h.key, "a", "1", { save: true });
    await h.accept(w);
    worker.wake();
    await waitFor("the push is at the remote", () => h.server.counts().push === 1);
    const failed = await waitFor("the cycle gave up", () => worker.snapshot().lastCause);
    expect(failed).toBe("the publication cycle passed its deadline of 2000 ms");
    expect(worker.snapshot()).toMatchObject({
      nextRetryAt: clock.now() + RETRY_INITIAL_MS,
      retainedWrites: 1,
      pendingWrites: 1,
    });
    expect(await h.published(w.id)).toBeNull();
    const commit = await nextOwnerPublishes(worker, w.id);
    expect(await h.server.tip("site")).toBe(commit);
  });

  it("a cycle whose deadline passed during a call stops before the next one", async () => {
    h = await harness(undefined, { idleMs: 20, maxMs: 100 });
    const clock = new ManualClock(Date.parse("2026-03-01T00:00:00Z"));
    const worker = await h.newWorker({
      clock,
      spec: patientCalls(),
      pushCycleTimeoutMs: 30_000,
      pollMs: 1000,
    });
    await waitFor("baseline", () => worker.snapshot().remoteTip !== undefined);
    // Somebody else moves the branch: our push is rejected, and the fetch that follows stalls.
    await foreignCommit(join(h.server.root, "site.git"), "other.txt", "theirs\n");
    const reads = h.server.counts().advertisement;
    const stall = h.server.faults.stallNext(1, "advertisement");
    const w = configMapWrite(h.key, "a", "1", { save: true });
    await h.accept(w);
    worker.wake();
    await waitFor(
      "the fetch after the rejection is at the remote",
      () => h.server.counts().advertisement > reads,
    );
    expect(h.server.counts().push).toBe(1);

    // The deadline passes while that fetch hangs; it answers afterwards.
    clock.advance(31_000);
    stall.release();
    const failed = await waitFor("the cycle gave up", () => worker.snapshot().lastCause);
    expect(failed).toBe("the publication cycle passed its deadline of 30000 ms");
    expect(h.server.counts().push).toBe(1);
    expect(await h.published(w.id)).toBeNull();

    await waitFor("worker asleep", () => clock.waiting() > 0);
    clock.advance(RETRY_INITIAL_MS);
    await waitFor("published on the retry", () => h.published(w.id));
    expect(await h.file("other.txt")).toBe("theirs\n");
    expect(await h.file(fileOf("a"))).toContain('value: "1"');
  });

  it("stopping the worker ends a stalled call at once and keeps every write for the next owner", async () => {
    h = await harness(undefined, { idleMs: 20, maxMs: 100 });
    const worker = await h.newWorker({ spec: patientCalls() });
    await waitFor("baseline", () => worker.snapshot().remoteTip !== undefined);
    h.server.faults.stallNext(1, "push");
    const w = configMapWrite(h.key, "a", "1", { save: true });
    await h.accept(w);
    await waitFor("the push is at the remote", () => h.server.counts().push === 1);
    let stopped = false;
    const stopping = worker.stop().then(() => {
      stopped = true;
    });
    await waitFor("stopped", () => stopped, 5_000);
    await stopping;
    expect(await h.published(w.id)).toBeNull();
    expect(await h.inboxLength()).toBe(1);

    // The lease given back, the next owner publishes it.
    await h.redis.client.del(branchKeys(h.redis.prefix, h.key).lease);
    await h.newWorker({ replica: "r2" });
    await waitFor("published by the next owner", () => h.published(w.id));
  });
});
