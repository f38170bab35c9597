import { Queue, Worker } from "bullmq";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type IsolatedRedis, isolatedRedis } from "../test/redis/isolated.js";
import { until } from "../test/support/wait.js";
import { APPLIER_KINDS, attemptsQueue, QUEUES } from "./contract.js";
import { METRIC_NAMES } from "./metric-names.js";
import { registerQueueMetrics, sampleQueue, stuckDeadlines } from "./queue-metrics.js";
import { connectRedis } from "./redis.js";

describe("queue metrics", () => {
  let redis: IsolatedRedis;
  let queue: Queue;
  let worker: Worker;
  beforeAll(async () => {
    redis = await isolatedRedis("qm");
    queue = new Queue("branches", { connection: redis.client, prefix: redis.prefix });
    // A worker that takes jobs by hand and never finishes them: an active job nobody completes.
    worker = new Worker("branches", null, { connection: connectRedis(redis.url), prefix: redis.prefix });
  });
  afterAll(async () => {
    await worker.close();
    await queue.close();
    await redis.cleanup();
  });

  it("reports counts, the oldest waiting job's age, and jobs active past their deadline", async () => {
    const t0 = Date.now();
    await queue.add("work", { n: 1 });
    const active = await worker.getNextJob("token-1");
    expect(active).toBeDefined();
    await queue.add("work", { n: 2 });
    await queue.add("work", { n: 3 });

    const soon = await sampleQueue(queue, 60_000, t0 + 1000);
    expect(soon.counts).toMatchObject({ waiting: 2, active: 1 });
    expect(soon.stuck).toBe(0);
    const later = await sampleQueue(queue, 60_000, t0 + 10 * 60_000);
    expect(later.stuck).toBe(1);
    expect(later.oldestWaitingSeconds).toBeGreaterThan(590);

    const registry = new Registry();
    const m = registerQueueMetrics({
      registry,
      queues: [queue],
      stuckAfterMs: 60_000,
      now: () => t0 + 10 * 60_000,
    });
    const text = await registry.metrics();
    expect(text).toContain(`${METRIC_NAMES.queueJobs}{queue="branches",state="waiting"} 2`);
    expect(text).toContain(`${METRIC_NAMES.queueStuckJobs}{queue="branches"} 1`);
    expect(text).toMatch(new RegExp(`${METRIC_NAMES.queueOldestWaitingSeconds}\\{queue="branches"\\} 59\\d`));
    await m.close();
  });

  it("counts an active job whose process died (its lock ran out) as stuck at once, whatever its deadline", async () => {
    const q = new Queue("attempts-flux", { connection: redis.client, prefix: redis.prefix });
    // A process that takes a job and dies: it never renews its short lock.
    const dying = new Worker("attempts-flux", null, {
      connection: connectRedis(redis.url),
      prefix: redis.prefix,
      lockDuration: 300,
    });
    try {
      await q.add("attempt", {});
      expect(await dying.getNextJob("token-dead")).toBeDefined();
      // Alive (the lock is held): a long operation is not stuck, however long it runs.
      const held = await sampleQueue(q, Number.POSITIVE_INFINITY, Date.now() + 3_600_000);
      expect(held).toMatchObject({ counts: { active: 1 }, stuck: 0 });
      const lost = await until(
        async () => {
          const s = await sampleQueue(q, Number.POSITIVE_INFINITY, Date.now());
          return s.stuck === 1 && s;
        },
        "the job counted stuck once its lock ran out",
        { timeoutMs: 10_000, everyMs: 50 },
      );
      expect(lost.counts.active).toBe(1);
    } finally {
      await dying.close(true);
      await q.obliterate({ force: true });
      await q.close();
    }
  });

  it("never counts a job that ends while it is sampled as stuck (the lock goes with the job)", async () => {
    const q = new Queue("notices", { connection: redis.client, prefix: redis.prefix });
    // Jobs that end at once, many at a time: each is active for an instant, then completed and its
    // lock removed, while samples are read.
    const quick = new Worker("notices", async () => {}, {
      connection: connectRedis(redis.url),
      prefix: redis.prefix,
      concurrency: 8,
    });
    try {
      await q.addBulk(Array.from({ length: 600 }, (_, i) => ({ name: "n", data: { i } })));
      const seen: number[] = [];
      let sawActive = false;
      while (((await q.getJobCounts("completed")).completed ?? 0) < 600) {
        const sample = await sampleQueue(q, Number.POSITIVE_INFINITY, Date.now());
        if (sample.counts.active > 0) sawActive = true;
        seen.push(sample.stuck);
      }
      expect(sawActive).toBe(true);
      expect(seen.filter((n) => n > 0)).toEqual([]);
    } finally {
      await quick.close();
      await q.obliterate({ force: true });
      await q.close();
    }
  });

  it("gives attempt jobs no deadline (an operation is followed as long as it runs), every other queue the default", () => {
    const deadline = stuckDeadlines(300_000);
    for (const kind of APPLIER_KINDS) expect(deadline(attemptsQueue(kind))).toBe(Number.POSITIVE_INFINITY);
    for (const q of Object.values(QUEUES)) expect(deadline(q)).toBe(300_000);
  });

  it("counts failed jobs from QueueEvents", async () => {
    const q = new Queue("reports", { connection: redis.client, prefix: redis.prefix });
    const registry = new Registry();
    const m = registerQueueMetrics({
      registry,
      queues: [q],
      stuckAfterMs: 60_000,
      eventsConnection: () => connectRedis(redis.url),
    });
    const failing = new Worker(
      "reports",
      async () => {
        throw new Error("boom");
      },
      { connection: connectRedis(redis.url), prefix: redis.prefix },
    );
    await m.ready();
    const zero = await registry.metrics();
    expect(zero).toContain(`${METRIC_NAMES.jobsFailedTotal}{queue="reports"} 0`);
    // Ready means connected, not yet reading the event stream (its first read starts at the
    // newest event): a failure in between is not seen, so another job fails each poll until one is.
    const failed = new RegExp(`${METRIC_NAMES.jobsFailedTotal}\\{queue="reports"\\} [1-9]`);
    const text = await until(
      async () => {
        const t = await registry.metrics();
        if (failed.test(t)) return t;
        await q.add("r", {});
        return false;
      },
      "a failed job counted",
      { timeoutMs: 30_000, everyMs: 200 },
    );
    expect(text).toMatch(failed);
    await failing.close();
    await m.close();
    await q.close();
  });
});
