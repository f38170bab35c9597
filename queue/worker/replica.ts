/**
 * One worker replica: takes branches (a lease per branch), runs a branch worker for each branch it
 * owns, and gives them up when it loses a lease. BullMQ's deduplicated `branches` job is only a
 * "this branch has work" signal that wakes the owner or lets a replica take an unowned branch; the
 * writes themselves wait in the branch's inbox. A sweep of the known branches takes over branches
 * whose owner died, within the lease time plus one sweep: it takes their leases and hands them to
 * the replica's start queue (start-queue.ts), which starts their branch workers beside the sweeps,
 * so the next sweep never waits for the starts of the last one. Each replica announces
 * itself in Redis and, balancing, hands branches over a few at a time while it owns more than its
 * fair share, so replicas started later share the work (balancing.ts, docs/design/balancing.md).
 */
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { type Job, Queue, Worker } from "bullmq";
import type { Redis } from "ioredis";
import { branchKey, Notice, normalizeRepoUrl, QUEUES, Report } from "../contract.js";
import type { BranchSpec, Directory } from "../directory.js";
import { errorMessage } from "../errors.js";
import { BareRepo } from "../git/repo.js";
import { appendNotice, signalBranch } from "../intake.js";
import { knownBranchesKey } from "../keys.js";
import type { Logger } from "../log.js";
import { bullConnection, CONSUMER_CLOSE_MS, closedWithin, connectRedis, within } from "../redis.js";
import { Slots } from "../slots.js";
import { type BalanceSettings, DEFAULT_BALANCE, type OwnedBranch } from "./balance.js";
import { ReplicaBalance } from "./balancing.js";
import { type BranchHooks, BranchWorker, type BranchWorkerOptions } from "./branch-worker.js";
import { DEFAULT_IDLE_POLL_MS, DEFAULT_INBOX_CHECK_MS } from "./idle.js";
import { unreadInboxes } from "./inbox.js";
import { acquireLeases, BranchLease, DEFAULT_LEASE_MS } from "./lease.js";
import type { WorkerMetrics } from "./metrics.js";
import { StartQueue } from "./start-queue.js";
import type { StatusSink } from "./status.js";

/** Something that runs beside a branch worker for as long as the replica owns the branch. */
export interface BranchAttachment {
  hooks: BranchHooks;
  /**
   * Nothing under way beside the worker (no apply attempt out, no apply window open): balancing
   * hands over only a branch whose worker and attachment are both quiet. Absent: quiet.
   */
  quiet?(): boolean;
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
  /**
   * Balancing branches between replicas (default on): `false` turns it off (the replica still
   * announces itself, so the others count it). Partial settings override DEFAULT_BALANCE.
   */
  balance?: false | (Partial<BalanceSettings> & { periodMs?: number });
  /** Settings passed to every branch worker (clock, budget, intervals...). */
  branch?: Partial<Omit<BranchWorkerOptions, "spec" | "redis" | "prefix" | "lease" | "repo" | "log">>;
}

export class Replica {
  readonly id: string;
  private readonly redis: Redis;
  private readonly workers = new Map<
    string,
    { worker: BranchWorker; lease: BranchLease; attached?: BranchAttachment; takenAt: number }
  >();
  /** Branches being handed over: stopping, their lease not given back yet. */
  private readonly handing = new Set<string>();
  /**
   * Leases held while no branch worker of ours runs on them: a claim starting one, a hand-over
   * stopping one. Renewed with the others: a slow start or stop must not let the lease lapse while
   * we still go on to run, or still run, the branch.
   */
  private readonly between = new Map<string, BranchLease>();
  /** Presence and balancing: the heartbeat, the fair share, the hand-overs. */
  private readonly balance: ReplicaBalance;
  private readonly repos = new Map<string, Promise<BareRepo>>();
  /** Branches being taken (a claim, or a start queued by a sweep): one take per branch at a time. */
  private readonly claiming = new Map<string, Promise<void>>();
  /** Known branches no GitTarget named when last taken (warned about once). */
  private readonly unnamed = new Set<string>();
  /** Branches a sweep took, waiting for their branch worker to start. */
  private readonly starts: StartQueue;
  /** The sweep running now, if one is. */
  private sweepRun: Promise<unknown> | undefined;
  /** A sweep due when the first lease another replica holds lapses (sooner than the period). */
  private earlySweep: NodeJS.Timeout | undefined;
  private bull: Worker[] = [];
  private branchesQueue: Queue | undefined;
  private timers: NodeJS.Timeout[] = [];
  /** Runs until the last lease is given back, so a stop that takes long keeps them. */
  private renewTimer: NodeJS.Timeout | undefined;
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
    this.balance = new ReplicaBalance({
      redis: this.redis,
      prefix: o.prefix,
      replicaId: this.id,
      leaseMs: this.leaseMs,
      enabled: this.balancing,
      settings: this.balanceSettings,
      running: () => this.workers.size,
      owned: () => this.ownedForBalance(),
      handOver: (key) => this.handOver(key),
      giveBack: (count) => this.giveBackWaiting(count),
      stopping: () => this.stopping,
      log: o.log,
    });
    this.starts = new StartQueue({
      claiming: this.claiming,
      start: (key, lease) => this.takeBranch(key, lease),
      runningLease: (key) => this.workers.get(key)?.lease,
      stopping: () => this.stopping,
      log: o.log,
    });
  }

  private get leaseMs() {
    return this.o.leaseMs ?? DEFAULT_LEASE_MS;
  }

  /** How often every lease is renewed: a third of the lease. */
  private get renewMs() {
    return Math.max(200, Math.floor(this.leaseMs / 3));
  }

  private get sweepMs() {
    return this.o.sweepMs ?? Math.min(2000, this.renewMs);
  }

  private get balancing(): boolean {
    return this.o.balance !== false;
  }

  private get balanceSettings(): BalanceSettings & { periodMs: number } {
    const b = this.o.balance === false ? {} : (this.o.balance ?? {});
    return { ...DEFAULT_BALANCE, periodMs: this.sweepMs, ...b };
  }

  /** How long a hand-over's marker keeps the lease for a replica under its share: a sweep and a half. */
  private get handoffMs() {
    return Math.ceil(this.sweepMs * 1.5);
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
    this.renewTimer = setInterval(() => void this.renewAll(), this.renewMs);
    this.timers.push(setInterval(() => void this.sweep(), this.sweepMs));
    this.timers.push(setInterval(() => void this.balance.presence(), this.balanceSettings.periodMs));
    const checkEvery = this.o.inboxCheckMs ?? this.o.branch?.pollMs ?? DEFAULT_INBOX_CHECK_MS;
    // Branch workers that read their inbox at least this often by themselves need no check: it
    // would only read the same inboxes again.
    if ((this.o.branch?.idlePollMs ?? DEFAULT_IDLE_POLL_MS) > checkEvery)
      this.timers.push(setInterval(() => void this.checkInboxes(), checkEvery));
    // Announced before the first sweep, so a replica started beside others takes its share only.
    await this.balance.presence();
    // Started once the branches free now are owned and their branch workers started.
    await Promise.all(await this.sweepOnce());
  }

  /** Branch keys this replica owns now. */
  owned(): string[] {
    return [...this.workers.keys()];
  }

  branch(key: string): BranchWorker | undefined {
    return this.workers.get(key)?.worker;
  }

  /** Takes the branch if nobody owns it, or wakes our worker for it. */
  async claim(key: string): Promise<void> {
    if (this.stopping || this.handing.has(key)) return;
    const mine = this.workers.get(key);
    if (mine) {
      mine.worker.wake();
      return;
    }
    const inflight = this.claiming.get(key);
    if (inflight) return inflight;
    const p = this.takeBranch(key).finally(() => this.claiming.delete(key));
    this.claiming.set(key, p);
    return p;
  }

  /** Starts the branch's worker, with `taken` when a sweep took its lease already. */
  private async takeBranch(key: string, taken?: BranchLease): Promise<void> {
    const lease = taken ?? new BranchLease(this.redis, this.o.prefix, key, this.id, this.leaseMs);
    if (taken) return this.startBranch(key, lease);
    // Counted before this branch is (its claim is recorded once this call returns its promise).
    if (!(await lease.acquire(this.balance.room(this.ownedCount()) > 0))) return;
    this.between.set(key, lease);
    try {
      await this.startBranch(key, lease);
    } finally {
      if (this.between.get(key) === lease) this.between.delete(key);
    }
  }

  /** Starts the branch's worker on a lease taken (by a claim or a sweep) and renewed meanwhile. */
  private async startBranch(key: string, lease: BranchLease): Promise<void> {
    if (this.stopping) {
      await lease.release().catch(() => {});
      return;
    }
    const spec = await this.o.directory.branch(key);
    if (!spec) {
      // A branch stays known once its GitTargets are gone, and every sweep asks again: said once.
      if (this.unnamed.has(key)) this.o.log.debug({ branch: key }, "no GitTarget names this branch");
      else this.o.log.warn({ branch: key }, "no GitTarget names this branch; leaving it");
      this.unnamed.add(key);
      await lease.release();
      return;
    }
    this.unnamed.delete(key);
    const repo = await this.repoFor(spec);
    // A renewal found the lease another replica's while we looked the branch up: not ours to start.
    if (!lease.token) {
      this.o.log.warn({ branch: key }, "lost the branch's lease while starting it; not starting it");
      return;
    }
    const log = this.o.log.child({ replica: this.id, fence: lease.fence });
    const attached = this.o.attach?.({ key, spec, lease, redis: this.redis, log });
    const hooks = mergeHooks(this.o.hooks?.(key), attached?.hooks);
    const worker = new BranchWorker({
      baselineSlots: this.baselineSlots,
      // Longer (`branch.idlePollMs`) only with the inbox check to wake an idle branch for news.
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
    this.workers.set(key, { worker, lease, ...(attached ? { attached } : {}), takenAt: Date.now() });
    this.between.delete(key);
    this.starts.started(key, lease);
    this.o.log.info({ branch: key, fence: lease.fence, replica: this.id }, "took the branch");
    attached?.start(worker);
    worker.start();
    void worker.done.then(async () => {
      await attached?.stop();
      if (this.workers.get(key)?.worker === worker) this.workers.delete(key);
    });
  }

  /**
   * The persistent clone of a branch's repository, one per GitProvider and repository: what one
   * provider's credentials fetched is never read by a branch of another.
   */
  private repoFor(spec: BranchSpec): Promise<BareRepo> {
    const owner = spec.provider ? `${spec.provider.namespace}_${spec.provider.name}_` : "";
    const name = `${owner}${normalizeRepoUrl(spec.remote.url)}`.replace(/[^A-Za-z0-9._-]+/g, "_");
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
      // let another replica take them meanwhile. One another replica holds now is not started.
      await Promise.all(
        [...this.starts.starting].map(async ([key, lease]) => {
          if (await lease.renew().catch(() => true)) return;
          this.o.log.warn({ branch: key }, "lost the lease of a branch still starting; not starting it");
          this.starts.started(key, lease);
          this.starts.drop(key);
        }),
      );
      // Leases of branches being started by a claim or stopped by a hand-over: one lost makes the
      // start stop short of the worker (its token is gone) and the hand-over give nothing back.
      await Promise.all(
        [...this.between].map(async ([key, lease]) => {
          // Given back meanwhile (the hand-over's own script): not lost.
          if ((await lease.renew().catch(() => true)) || this.between.get(key) !== lease) return;
          this.between.delete(key);
          this.o.log.warn({ branch: key }, "lost the lease of a branch starting or stopping here");
        }),
      );
      await Promise.all(
        [...this.workers].map(async ([key, { worker, lease }]) => {
          try {
            // One given back meanwhile (a stop releasing it) is not ours to speak of.
            if (!(await lease.renew()) && this.workers.get(key)?.worker === worker) {
              this.o.log.warn({ branch: key }, "lost the branch's lease; stopping its worker");
              this.workers.delete(key);
              await worker.stop();
            }
          } catch (err) {
            this.o.log.warn({ branch: key, err: errorMessage(err) }, "lease renewal failed");
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
      this.o.log.warn({ err: errorMessage(err) }, "inbox check failed");
    } finally {
      this.checking = false;
    }
  }

  /**
   * Takes every known branch that has no owner (its owner died, or nobody took it yet): every
   * lease at once (one pipelined round trip per 500 branches), handed to the start queue, which
   * starts their branch workers beside the sweeps. A sweep ends once its leases are taken, so a
   * dead replica's thousand branches are owned within a round trip of their leases lapsing, and
   * the next sweep is due when the first lease another replica holds lapses, not a sweep period
   * later and not after the branch workers of this one started.
   */
  async sweep(): Promise<void> {
    await this.sweepOnce();
  }

  /** One sweep; resolves with the starts of the branches it took (each settles once started). */
  private async sweepOnce(): Promise<Array<Promise<void>>> {
    if (this.stopping) return [];
    if (this.sweeping) {
      // Asked while one runs (a lease lapsing now): once more right after it.
      this.sweepAgain = true;
      return [];
    }
    this.sweeping = true;
    const run = this.takeFree();
    this.sweepRun = run;
    try {
      return await run;
    } catch (err) {
      this.o.log.warn({ err: errorMessage(err) }, "sweep of known branches failed");
      return [];
    } finally {
      this.sweeping = false;
      this.sweepRun = undefined;
      if (this.sweepAgain && !this.stopping) {
        this.sweepAgain = false;
        void this.sweep();
      }
    }
  }

  private async takeFree(): Promise<Array<Promise<void>>> {
    const keys = (await this.redis.smembers(knownBranchesKey(this.o.prefix))).filter(
      (k) => !this.workers.has(k) && !this.claiming.has(k) && !this.handing.has(k),
    );
    // Free leases nobody handed over are taken at once, whatever the share (a dead or stopped
    // replica's branches are owned again within a sweep); hand-overs only up to the share.
    const first = await acquireLeases(
      this.redis,
      this.o.prefix,
      keys,
      this.id,
      this.leaseMs,
      !this.balancing,
    );
    const taken = first.taken;
    const heldForMs = first.heldForMs;
    const room = Math.min(first.handedOver.length, this.balance.room(this.ownedCount() + taken.length));
    if (room > 0) {
      const more = await acquireLeases(
        this.redis,
        this.o.prefix,
        first.handedOver.slice(0, room),
        this.id,
        this.leaseMs,
        true,
      );
      taken.push(...more.taken);
    }
    if (this.stopping) {
      await Promise.all(taken.map((l) => l.release().catch(() => {})));
      return [];
    }
    const starts = this.starts.add(taken);
    this.sweepWhenLapsed(heldForMs);
    return starts;
  }

  /** Schedules one sweep for when the first of these leases (ms left) lapses, if before the next. */
  private sweepWhenLapsed(heldForMs: number[]): void {
    if (heldForMs.length === 0 || this.earlySweep) return;
    const soonest = Math.min(...heldForMs);
    if (soonest >= this.sweepMs) return;
    // Not sooner than EARLY_SWEEP_GAP_MS: leases lapsing a millisecond apart go in one sweep.
    this.earlySweep = setTimeout(
      () => {
        this.earlySweep = undefined;
        void this.sweep();
      },
      Math.max(soonest + 5, EARLY_SWEEP_GAP_MS),
    );
  }

  /** Branches owned, being started or being taken. */
  private ownedCount(): number {
    return this.workers.size + new Set([...this.claiming.keys(), ...this.starts.starting.keys()]).size;
  }

  /**
   * Hands one branch over: the graceful stop of its worker, then its lease given back with a
   * marker, so a replica under its share takes it at once (told through the branches queue) and
   * this one does not take it back. The worker is asked again right before: only a quiet branch
   * moves. Nothing is lost either way: what the inbox holds waits there for the next owner.
   */
  private async handOver(key: string, movable: (w: Owned) => boolean = quiet): Promise<void> {
    const mine = this.workers.get(key);
    if (!mine || this.handing.has(key)) return;
    if (!movable(mine)) return;
    this.handing.add(key);
    this.between.set(key, mine.lease);
    try {
      this.workers.delete(key);
      await mine.worker.stop();
      await mine.attached?.stop();
      const fence = mine.lease.fence;
      this.between.delete(key);
      const given = await this.giveLease(mine.lease);
      this.o.log.info(
        { branch: key, fence, replica: this.id, given },
        "handed the branch over to balance the replicas",
      );
    } finally {
      this.between.delete(key);
      this.handing.delete(key);
    }
  }

  /**
   * What balancing counts as owned: a branch starting now cannot move until it runs; one in the
   * start queue, or whose worker waits for its first read, is waiting (given back at once).
   */
  private ownedForBalance(): { running: OwnedBranch[]; waiting: number } {
    const running: OwnedBranch[] = this.starts
      .underway()
      .map((key) => ({ key, takenAt: Date.now(), quiet: false }));
    let waiting = this.starts.waiting;
    for (const [key, w] of this.workers) {
      if (unread(w)) waiting++;
      else running.push({ key, takenAt: w.takenAt, quiet: quiet(w) });
    }
    return { running, waiting };
  }

  /**
   * Gives back branches a sweep took that have not started here, with a hand-over marker, and
   * tells the others through the branches queue: replicas started together split the branches
   * within a presence round, where the first to sweep would otherwise start them all and hand
   * them over a few at a time.
   */
  private async giveBackWaiting(count: number): Promise<void> {
    const leases = this.starts.takeBack(count);
    // Then branch workers still waiting for their first read, the last taken first.
    const unreadKeys = [...this.workers]
      .filter(([, w]) => unread(w))
      .sort(([, a], [, b]) => b.takenAt - a.takenAt)
      .slice(0, Math.max(0, count - leases.length))
      .map(([key]) => key);
    await Promise.all(unreadKeys.map((key) => this.handOver(key, unread)));
    const given = await Promise.all(leases.map((lease) => this.giveLease(lease).catch(() => false)));
    if (leases.length + unreadKeys.length > 0)
      this.o.log.info(
        {
          replica: this.id,
          notStarted: leases.length,
          given: given.filter(Boolean).length,
          unread: unreadKeys.length,
        },
        "gave back branches not started or not read here to balance the replicas",
      );
  }

  /**
   * Gives a lease back with a hand-over marker and, when given, tells the others through the
   * branches queue, so a replica under its share takes it at once.
   */
  private async giveLease(lease: BranchLease): Promise<boolean> {
    const given = await lease.handOver(this.handoffMs);
    if (given && this.branchesQueue) await signalBranch(this.branchesQueue, lease.branchKey).catch(() => {});
    return given;
  }

  /** Moves a notice into the inbox of each branch it concerns, in arrival order with the writes. */
  private async routeNotice(data: unknown): Promise<void> {
    const notice = Notice.parse(data);
    const keys =
      notice.type === "push"
        ? new Set([
            ...notice.branchKeys,
            ...notice.repository.map((r) => branchKey(notice.provider, r, notice.branch)),
          ])
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

  /**
   * Stops every branch worker and gives their leases back, so another replica takes them at once.
   * The leases are renewed until then: stopping many branch workers one after another outlasts a
   * lease, and one lapsed meanwhile would let another replica run the branch beside ours.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    for (const t of this.timers) clearInterval(t);
    if (this.earlySweep) clearTimeout(this.earlySweep);
    // A sweep taking leases now gives them back when it sees the stop (bounded: Redis may be gone).
    const sweeping = this.sweepRun?.catch(() => {});
    if (sweeping) await within(sweeping, CONSUMER_CLOSE_MS);
    // Branches a sweep took and never started: their leases go back now, for another replica.
    await this.starts.releaseAll();
    // Starts in flight end (their workers are stopped below with the others).
    await this.balance.leave();
    await Promise.all(this.claiming.values());
    await Promise.all(this.bull.map((w) => closeConsumer(w, this.o.log)));
    await this.branchesQueue?.close();
    for (const [key, { worker, lease, attached }] of this.workers) {
      await worker.stop();
      await attached?.stop();
      this.workers.delete(key);
      await lease.release().catch(() => {});
    }
    clearInterval(this.renewTimer);
    this.redis.disconnect();
  }
}

/** Branches reading their baseline at once, by default. */
export const DEFAULT_BASELINE_CONCURRENCY = 32;

/** The shortest wait before a sweep due at a lease's lapse (a burst of lapses makes one sweep). */
const EARLY_SWEEP_GAP_MS = 50;

/**
 * Closes a queue consumer gracefully, waiting at most CONSUMER_CLOSE_MS: past the bound the stop
 * goes on, so the branch workers stop and the leases go back.
 */
async function closeConsumer(w: Worker, log: Logger): Promise<void> {
  if (!(await closedWithin(w, w.close())))
    log.warn({ queue: w.name }, "queue consumer did not close in time; stopping without it");
}

/** Whether a branch may be handed over: its worker and what runs beside it are both quiet. */
type Owned = { worker: BranchWorker; attached?: BranchAttachment };
const quiet = (w: Owned) => w.worker.quiet() && (w.attached?.quiet?.() ?? true);
/** Waiting for its first read, its decisions at rest: a hand-over now interrupts nothing. */
const unread = (w: Owned) => w.worker.awaitingFirstRead() && (w.attached?.quiet?.() ?? true);

/** Calls both sets of hooks, the replica's first. */
function mergeHooks(a: BranchHooks | undefined, b: BranchHooks | undefined): BranchHooks | undefined {
  if (!a || !b) return a ?? b;
  const out: BranchHooks = {};
  for (const name of new Set([...Object.keys(a), ...Object.keys(b)]) as Set<keyof BranchHooks>) {
    if (name === "savesEntries") {
      out.savesEntries = a.savesEntries === true || b.savesEntries === true;
      continue;
    }
    const f = a[name] as ((...x: unknown[]) => unknown) | undefined;
    const g = b[name] as ((...x: unknown[]) => unknown) | undefined;
    (out as Record<string, unknown>)[name] = async (...x: unknown[]) => {
      await f?.(...x);
      await g?.(...x);
    };
  }
  return out;
}
