/**
 * One worker replica: takes branches (a lease per branch), runs a branch worker for each branch it
 * owns, and gives them up when it loses a lease. BullMQ's deduplicated `branches` job is only a
 * "this branch has work" signal that wakes the owner or lets a replica take an unowned branch; the
 * writes themselves wait in the branch's inbox. A sweep of the known branches takes over branches
 * whose owner died, within the lease time plus one sweep.
 */
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { type Job, Queue, Worker } from "bullmq";
import type { Redis } from "ioredis";
import { branchKey, Notice, normalizeRepoUrl, QUEUES, Report } from "../contract.js";
import { BareRepo } from "../git/repo.js";
import { appendNotice, signalBranch } from "../intake.js";
import { knownBranchesKey } from "../keys.js";
import type { Logger } from "../log.js";
import { bullConnection, connectRedis } from "../redis.js";
import { type BranchHooks, BranchWorker, type BranchWorkerOptions } from "./branch-worker.js";
import type { BranchSpec, Directory } from "./directory.js";
import { DEFAULT_IDLE_POLL_MS, DEFAULT_INBOX_CHECK_MS } from "./idle.js";
import { unreadInboxes } from "./inbox.js";
import { acquireLeases, BranchLease, DEFAULT_LEASE_MS } from "./lease.js";
import type { WorkerMetrics } from "./metrics.js";
import { Slots } from "./slots.js";
import type { StatusSink } from "./status.js";

/** Something that runs beside a branch worker for as long as the replica owns the branch. */
export interface BranchAttachment {
  hooks: BranchHooks;
  /** Called with the worker before it starts. */
  start(worker: BranchWorker): void;
  /** Called when the worker stopped, before the lease is given back. */
  stop(): Promise<void>;
}

export interface BranchContext {
  key: string;
  spec: BranchSpec;
  lease: BranchLease;
  redis: Redis;
  log: Logger;
}

export interface ReplicaOptions {
  redisUrl: string;
  prefix: string;
  directory: Directory;
  /** Folder holding one persistent bare clone per repository. */
  cacheDir: string;
  log: Logger;
  replicaId?: string;
  leaseMs?: number;
  /** How often known branches are swept for ones without an owner. */
  sweepMs?: number;
  /**
   * How often the replica asks Redis, in one round trip for all its branches, which inboxes hold
   * entries their branch worker has not read, and wakes those: the bound on noticing a write or
   * notice whose wake-up signal was lost. Default `branch.pollMs`, else DEFAULT_INBOX_CHECK_MS.
   */
  inboxCheckMs?: number;
  /**
   * Branch workers reading the remote for the first time at once (default
   * DEFAULT_BASELINE_CONCURRENCY): a replica taking a thousand branches must not send a thousand
   * reads and downloads at once to one Git host.
   */
  baselineConcurrency?: number;
  status?: StatusSink;
  metrics?: WorkerMetrics;
  hooks?: (branchKey: string) => BranchHooks;
  /** Runs beside every branch worker (the decisions: queue/apply). */
  attach?: (ctx: BranchContext) => BranchAttachment;
  /** Settings passed to every branch worker (clock, budget, intervals...). */
  branch?: Partial<Omit<BranchWorkerOptions, "spec" | "redis" | "prefix" | "lease" | "repo" | "log">>;
}

export class Replica {
  readonly id: string;
  private readonly redis: Redis;
  private readonly workers = new Map<
    string,
    { worker: BranchWorker; lease: BranchLease; attached?: BranchAttachment }
  >();
  private readonly repos = new Map<string, Promise<BareRepo>>();
  private readonly claiming = new Map<string, Promise<void>>();
  /** Leases a sweep took whose branch worker is not started yet: renewed with the others. */
  private readonly starting = new Map<string, BranchLease>();
  /** A sweep due when the first lease another replica holds lapses (sooner than the period). */
  private earlySweep: NodeJS.Timeout | undefined;
  private bull: Worker[] = [];
  private branchesQueue: Queue | undefined;
  private timers: NodeJS.Timeout[] = [];
  private stopping = false;
  private renewing = false;
  private sweeping = false;
  private sweepAgain = false;
  private checking = false;

  private readonly baselineSlots: Slots;

  constructor(private readonly o: ReplicaOptions) {
    this.id = o.replicaId ?? `replica-${randomBytes(4).toString("hex")}`;
    this.baselineSlots = new Slots(o.baselineConcurrency ?? DEFAULT_BASELINE_CONCURRENCY);
    this.redis = connectRedis(o.redisUrl);
  }

  private get leaseMs() {
    return this.o.leaseMs ?? DEFAULT_LEASE_MS;
  }

  async start(): Promise<void> {
    const connection = bullConnection(this.o.redisUrl);
    const opts = { connection, prefix: this.o.prefix, concurrency: 16 };
    this.branchesQueue = new Queue(QUEUES.branches, { connection, prefix: this.o.prefix });
    const onError = (err: Error) => this.o.log.warn({ err: err.message }, "queue consumer error");
    this.branchesQueue.on("error", onError);
    this.bull.push(
      new Worker(QUEUES.branches, async (job: Job) => this.claim(String(job.data.branchKey)), opts).on(
        "error",
        onError,
      ),
      new Worker(QUEUES.notices, async (job: Job) => this.routeNotice(job.data), opts).on("error", onError),
      new Worker(QUEUES.reports, async (job: Job) => this.routeReport(job.data), opts).on("error", onError),
    );
    const renewEvery = Math.max(200, Math.floor(this.leaseMs / 3));
    this.timers.push(setInterval(() => void this.renewAll(), renewEvery));
    this.timers.push(setInterval(() => void this.sweep(), this.o.sweepMs ?? Math.min(2000, renewEvery)));
    const checkEvery = this.o.inboxCheckMs ?? this.o.branch?.pollMs ?? DEFAULT_INBOX_CHECK_MS;
    this.timers.push(setInterval(() => void this.checkInboxes(), checkEvery));
    await this.sweep();
  }

  /** Branch keys this replica owns now. */
  owned(): string[] {
    return [...this.workers.keys()];
  }

  branch(key: string): BranchWorker | undefined {
    return this.workers.get(key)?.worker;
  }

  /**
   * Takes the branch if nobody owns it, or wakes our worker for it. `taken` is its lease when a
   * sweep took it already.
   */
  async claim(key: string, taken?: BranchLease): Promise<void> {
    if (this.stopping) return;
    const mine = this.workers.get(key);
    if (mine) {
      mine.worker.wake();
      return;
    }
    const inflight = this.claiming.get(key);
    if (inflight) return inflight;
    const p = this.takeBranch(key, taken).finally(() => {
      this.claiming.delete(key);
      this.starting.delete(key);
    });
    this.claiming.set(key, p);
    return p;
  }

  private async takeBranch(key: string, taken?: BranchLease): Promise<void> {
    const lease = taken ?? new BranchLease(this.redis, this.o.prefix, key, this.id, this.leaseMs);
    if (!taken && !(await lease.acquire())) return;
    if (this.stopping) {
      await lease.release().catch(() => {});
      return;
    }
    const spec = await this.o.directory.branch(key);
    if (!spec) {
      this.o.log.warn({ branch: key }, "no GitTarget names this branch; leaving it");
      await lease.release();
      return;
    }
    const repo = await this.repoFor(spec.remote.url);
    const log = this.o.log.child({ replica: this.id, fence: lease.fence });
    const attached = this.o.attach?.({ key, spec, lease, redis: this.redis, log });
    const hooks = mergeHooks(this.o.hooks?.(key), attached?.hooks);
    const worker = new BranchWorker({
      baselineSlots: this.baselineSlots,
      // The inbox check wakes an idle branch for news: it need not read its inbox by itself.
      idlePollMs: DEFAULT_IDLE_POLL_MS,
      ...this.o.branch,
      spec,
      redis: this.redis,
      prefix: this.o.prefix,
      lease,
      repo,
      log,
      ...(this.o.status ? { status: this.o.status } : {}),
      ...(this.o.metrics ? { metrics: this.o.metrics } : {}),
      ...(hooks ? { hooks } : {}),
      refreshSpec: () => this.o.directory.branch(key),
    });
    this.workers.set(key, { worker, lease, ...(attached ? { attached } : {}) });
    this.o.log.info({ branch: key, fence: lease.fence, replica: this.id }, "took the branch");
    attached?.start(worker);
    worker.start();
    void worker.done.then(async () => {
      await attached?.stop();
      if (this.workers.get(key)?.worker === worker) this.workers.delete(key);
    });
  }

  private repoFor(url: string): Promise<BareRepo> {
    const name = normalizeRepoUrl(url).replace(/[^A-Za-z0-9._-]+/g, "_");
    let p = this.repos.get(name);
    if (!p) {
      p = BareRepo.open(join(this.o.cacheDir, `${name}.git`));
      this.repos.set(name, p);
    }
    return p;
  }

  /**
   * Renews every lease at once (one pipelined burst on the connection, not one round trip after
   * another): a thousand branches renewed in turn would outlast a third of the lease on a busy
   * machine, and the last ones would expire.
   */
  private async renewAll(): Promise<void> {
    if (this.renewing) return;
    this.renewing = true;
    try {
      // Leases a sweep took for branches still starting: a lapse before their worker runs would
      // let another replica take them meanwhile.
      await Promise.all(
        [...this.starting.values()].map(async (lease) => {
          await lease.renew().catch(() => false);
        }),
      );
      await Promise.all(
        [...this.workers].map(async ([key, { worker, lease }]) => {
          try {
            if (!(await lease.renew())) {
              this.o.log.warn({ branch: key }, "lost the branch's lease; stopping its worker");
              if (this.workers.get(key)?.worker === worker) this.workers.delete(key);
              await worker.stop();
            }
          } catch (err) {
            this.o.log.warn({ branch: key, err: (err as Error).message }, "lease renewal failed");
          }
        }),
      );
    } finally {
      this.renewing = false;
    }
  }

  /**
   * The safety net for a lost wake-up signal (a Redis restart between an append and its signal, a
   * signal taken by a replica that just lost the branch): asks Redis in one round trip which of
   * the branches owned here have inbox entries past what their worker read, and wakes those. Every
   * append also wakes its owner at once; this only bounds how late a lost signal is made good.
   */
  private async checkInboxes(): Promise<void> {
    if (this.checking || this.stopping) return;
    this.checking = true;
    try {
      const marks = [...this.workers]
        .filter(([, { worker }]) => worker.running)
        .map(([branchKey, { worker }]) => ({ branchKey, readTo: worker.readMark }));
      for (const key of await unreadInboxes(this.redis, this.o.prefix, marks)) {
        this.workers.get(key)?.worker.wake();
      }
    } catch (err) {
      this.o.log.warn({ err: (err as Error).message }, "inbox check failed");
    } finally {
      this.checking = false;
    }
  }

  /**
   * Takes every known branch that has no owner (its owner died, or nobody took it yet): first
   * every lease at once (one pipelined round trip per 500 branches), then the branch workers,
   * several at once. A dead replica's thousand branches are owned within a round trip of their
   * leases lapsing, and the next sweep is due when the first lease another replica holds lapses,
   * not a sweep period later.
   */
  async sweep(): Promise<void> {
    if (this.stopping) return;
    if (this.sweeping) {
      // Asked while one runs (a lease lapsing now): once more right after it.
      this.sweepAgain = true;
      return;
    }
    this.sweeping = true;
    try {
      const keys = (await this.redis.smembers(knownBranchesKey(this.o.prefix))).filter(
        (k) => !this.workers.has(k) && !this.claiming.has(k),
      );
      const { taken, heldForMs } = await acquireLeases(
        this.redis,
        this.o.prefix,
        keys,
        this.id,
        this.leaseMs,
      );
      if (this.stopping) {
        await Promise.all(taken.map((l) => l.release().catch(() => {})));
        return;
      }
      for (const lease of taken) this.starting.set(lease.branchKey, lease);
      this.sweepWhenLapsed(heldForMs);
      let next = 0;
      await Promise.all(
        Array.from({ length: Math.min(SWEEP_WIDTH, taken.length) }, async () => {
          while (next < taken.length && !this.stopping) {
            const lease = taken[next++] as BranchLease;
            await this.claim(lease.branchKey, lease);
          }
        }),
      );
    } catch (err) {
      this.o.log.warn({ err: (err as Error).message }, "sweep of known branches failed");
    } finally {
      this.sweeping = false;
      if (this.sweepAgain && !this.stopping) {
        this.sweepAgain = false;
        void this.sweep();
      }
    }
  }

  /** Schedules one sweep for when the first of these leases (ms left) lapses, if before the next. */
  private sweepWhenLapsed(heldForMs: number[]): void {
    if (heldForMs.length === 0 || this.earlySweep) return;
    const period = this.o.sweepMs ?? Math.min(2000, Math.max(200, Math.floor(this.leaseMs / 3)));
    const soonest = Math.min(...heldForMs);
    if (soonest >= period) return;
    this.earlySweep = setTimeout(() => {
      this.earlySweep = undefined;
      void this.sweep();
    }, soonest + 5);
  }

  /** Moves a notice into the inbox of each branch it concerns, in arrival order with the writes. */
  private async routeNotice(data: unknown): Promise<void> {
    const notice = Notice.parse(data);
    const keys =
      notice.type === "push"
        ? new Set([...notice.branchKeys, ...notice.repository.map((r) => branchKey(r, notice.branch))])
        : new Set([notice.branchKey]);
    // A key the gateway found a GitTarget for is known from now on, even before its first write.
    const named = new Set(notice.type === "push" ? notice.branchKeys : [notice.branchKey]);
    for (const key of keys) await this.append(key, notice.type, notice, named.has(key));
  }

  private async routeReport(data: unknown): Promise<void> {
    const report = Report.parse(data);
    await this.append(report.branchKey, "report", report);
  }

  private async append(
    key: string,
    kind: "push" | "refusal" | "report",
    data: unknown,
    named = false,
  ): Promise<void> {
    const known = named || (await this.redis.sismember(knownBranchesKey(this.o.prefix), key)) === 1;
    // A push to a branch no GitTarget writes is nobody's business.
    if (kind === "push" && !known) return;
    await appendNotice(this.redis, this.o.prefix, key, kind, data);
    // Our own branch is woken here, without a round through the branches queue; any other's
    // owner (or a replica to take it) hears of it through the queue.
    const mine = this.workers.get(key);
    if (mine) mine.worker.wake();
    else if (this.branchesQueue) await signalBranch(this.branchesQueue, key);
  }

  /** Stops every branch worker and gives their leases back, so another replica takes them at once. */
  async stop(): Promise<void> {
    this.stopping = true;
    for (const t of this.timers) clearInterval(t);
    if (this.earlySweep) clearTimeout(this.earlySweep);
    await Promise.all(this.claiming.values());
    await Promise.all(this.bull.map((w) => closeConsumer(w, this.o.log)));
    await this.branchesQueue?.close();
    for (const { worker, lease, attached } of this.workers.values()) {
      await worker.stop();
      await attached?.stop();
      await lease.release().catch(() => {});
    }
    this.workers.clear();
    this.redis.disconnect();
  }
}

/** Branches reading their baseline at once, by default. */
export const DEFAULT_BASELINE_CONCURRENCY = 32;

/** Branches a sweep takes at once. */
const SWEEP_WIDTH = 32;

/** How long a stop waits for a queue consumer's graceful close (its jobs are short). */
const CONSUMER_CLOSE_MS = 5_000;

/**
 * Closes a queue consumer gracefully, waiting at most CONSUMER_CLOSE_MS. BullMQ's close waits
 * forever for a blocking connection that is still reconnecting (a stop right after Redis came
 * back): past the bound the stop goes on, so the branch workers stop and the leases go back.
 */
async function closeConsumer(w: Worker, log: Logger): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const closed = await Promise.race([
    w.close().then(() => true),
    new Promise<false>((r) => {
      timer = setTimeout(() => r(false), CONSUMER_CLOSE_MS);
    }),
  ]).finally(() => clearTimeout(timer));
  if (!closed) {
    log.warn({ queue: w.name }, "queue consumer did not close in time; stopping without it");
    void w.disconnect().catch(() => {});
  }
}

/** Calls both sets of hooks, the replica's first. */
function mergeHooks(a: BranchHooks | undefined, b: BranchHooks | undefined): BranchHooks | undefined {
  if (!a || !b) return a ?? b;
  const out: BranchHooks = {};
  for (const name of new Set([...Object.keys(a), ...Object.keys(b)]) as Set<keyof BranchHooks>) {
    const f = a[name] as ((x: unknown) => unknown) | undefined;
    const g = b[name] as ((x: unknown) => unknown) | undefined;
    (out as Record<string, unknown>)[name] = async (x: unknown) => {
      await f?.(x);
      await g?.(x);
    };
  }
  return out;
}
