/**
 * Queue health as Prometheus metrics, read from Redis at scrape time: jobs per state, age of the
 * oldest waiting job, stuck jobs, and counters of failures and stalled-job recoveries fed by
 * QueueEvents. Shared by the gateway and the worker; each process registers it once on its own
 * registry.
 *
 * A job is stuck when it is active and makes no progress: its lock ran out (the process that
 * took it died, and no live consumer has recovered it yet), or it is active past its queue's
 * deadline (a hung processor keeps renewing its lock, so only age shows it). Attempt jobs have no
 * deadline: one stays active while its sidecar follows the operation, however long a healthy
 * sync takes, and only a lost lock makes it stuck.
 */
import { type Queue, QueueEvents } from "bullmq";
import type { Redis } from "ioredis";
import { Counter, Gauge, type Registry } from "prom-client";
import { APPLIER_KINDS, attemptsQueue } from "./contract.js";
import { METRIC_NAMES } from "./metric-names.js";

/** Counter {queue}: stalled jobs BullMQ moved back to waiting (a worker lost its lock). */
export const QUEUE_STALLED_TOTAL = "applygate_queue_stalled_total";

export const JOB_STATES = ["waiting", "active", "delayed", "failed", "completed"] as const;

export interface QueueSample {
  queue: string;
  counts: Record<(typeof JOB_STATES)[number], number>;
  oldestWaitingSeconds: number;
  stuck: number;
}

export interface QueueMetricsOptions {
  registry: Registry;
  queues: Queue[];
  /** How long a job may stay active before it counts as stuck; per queue name or one for all. */
  stuckAfterMs: number | ((queue: string) => number);
  /** Opens a dedicated connection for each queue's QueueEvents; omit to skip the event counters. */
  eventsConnection?: () => Redis;
  now?: () => number;
  onError?: (err: unknown) => void;
}

const ATTEMPTS_QUEUES: readonly string[] = APPLIER_KINDS.map(attemptsQueue);

/** Each queue's deadline for an active job: none for attempts, `defaultMs` for the others. */
export function stuckDeadlines(defaultMs: number): (queue: string) => number {
  return (queue) => (ATTEMPTS_QUEUES.includes(queue) ? Number.POSITIVE_INFINITY : defaultMs);
}

/** Reads one queue's figures. Looks at no more than `maxActive` active jobs. */
export async function sampleQueue(
  queue: Queue,
  stuckAfterMs: number,
  now: number,
  maxActive = 1000,
): Promise<QueueSample> {
  const counts = await queue.getJobCounts(...JOB_STATES);
  const [oldest] = await queue.getJobs(["waiting"], 0, 0, true);
  const active = ((counts.active ?? 0) > 0 ? await queue.getJobs(["active"], 0, maxActive - 1) : []).filter(
    (j) => j !== undefined,
  );
  // BullMQ keeps `<job key>:lock` (the holder's token) while a live consumer holds the job. The
  // lock and the job's place in the active list are read in one transaction: a job that ended
  // since the list was read has neither, and is not counted.
  let stuck = 0;
  if (active.length > 0) {
    const tx = (await queue.getBackend().client).multi();
    for (const j of active)
      tx.runCommand("get", [`${queue.toKey(j.id!)}:lock`]).runCommand("lpos", [queue.keys.active, j.id!]);
    const replies = (await tx.exec()) ?? [];
    active.forEach((j, i) => {
      const [lockErr, lock] = replies[2 * i] ?? [null, undefined];
      const [posErr, pos] = replies[2 * i + 1] ?? [null, undefined];
      if (lockErr || posErr) throw lockErr ?? posErr;
      const stillActive = pos !== null && pos !== undefined;
      if (stillActive && j.processedOn !== undefined && (lock === null || now - j.processedOn > stuckAfterMs))
        stuck++;
    });
  }
  return {
    queue: queue.name,
    counts: Object.fromEntries(JOB_STATES.map((s) => [s, counts[s] ?? 0])) as QueueSample["counts"],
    oldestWaitingSeconds: oldest ? Math.max(0, (now - oldest.timestamp) / 1000) : 0,
    stuck,
  };
}

export function registerQueueMetrics(opts: QueueMetricsOptions): {
  /** Resolves once every QueueEvents connection is up. */
  ready(): Promise<void>;
  close(): Promise<void>;
} {
  const now = opts.now ?? Date.now;
  const deadline = (q: string) =>
    typeof opts.stuckAfterMs === "number" ? opts.stuckAfterMs : opts.stuckAfterMs(q);
  // One Redis read per scrape, shared by the three gauges.
  let pending: { at: number; samples: Promise<QueueSample[]> } | undefined;
  const samples = () => {
    const t = now();
    if (!pending || t - pending.at > 500) {
      pending = {
        at: t,
        samples: Promise.all(opts.queues.map((q) => sampleQueue(q, deadline(q.name), t))).catch((err) => {
          opts.onError?.(err);
          return [];
        }),
      };
    }
    return pending.samples;
  };

  new Gauge({
    name: METRIC_NAMES.queueJobs,
    help: "Jobs per queue and BullMQ state.",
    labelNames: ["queue", "state"],
    registers: [opts.registry],
    async collect() {
      this.reset();
      for (const s of await samples())
        for (const state of JOB_STATES) this.set({ queue: s.queue, state }, s.counts[state]);
    },
  });
  new Gauge({
    name: METRIC_NAMES.queueOldestWaitingSeconds,
    help: "Age in seconds of the oldest job waiting in the queue (0 when none).",
    labelNames: ["queue"],
    registers: [opts.registry],
    async collect() {
      this.reset();
      for (const s of await samples()) this.set({ queue: s.queue }, s.oldestWaitingSeconds);
    },
  });
  new Gauge({
    name: METRIC_NAMES.queueStuckJobs,
    help: "Active jobs whose process died (their lock ran out), or active past their queue's deadline.",
    labelNames: ["queue"],
    registers: [opts.registry],
    async collect() {
      this.reset();
      for (const s of await samples()) this.set({ queue: s.queue }, s.stuck);
    },
  });
  const failed = new Counter({
    name: METRIC_NAMES.jobsFailedTotal,
    help: "Jobs that ended failed.",
    labelNames: ["queue"],
    registers: [opts.registry],
  });
  const stalled = new Counter({
    name: QUEUE_STALLED_TOTAL,
    help: "Stalled jobs moved back to waiting after their worker lost the lock.",
    labelNames: ["queue"],
    registers: [opts.registry],
  });

  const events: QueueEvents[] = [];
  if (opts.eventsConnection) {
    for (const q of opts.queues) {
      failed.inc({ queue: q.name }, 0);
      stalled.inc({ queue: q.name }, 0);
      const ev = new QueueEvents(q.name, { connection: opts.eventsConnection(), prefix: q.opts.prefix });
      ev.on("failed", () => failed.inc({ queue: q.name }));
      ev.on("stalled", () => stalled.inc({ queue: q.name }));
      ev.on("error", (err) => opts.onError?.(err));
      events.push(ev);
    }
  }
  return {
    async ready() {
      await Promise.all(events.map((e) => e.waitUntilReady()));
    },
    async close() {
      await Promise.all(events.map((e) => e.close().catch(() => {})));
    },
  };
}
