/**
 * The replica's start queue: the branches a sweep took, their branch workers started a few at a
 * time beside the sweeps, so a sweep ends as soon as its leases are taken and the next one is
 * never held up by the starts of the last. A lease taken and not started yet is renewed with the
 * others (`starting`); one lost meanwhile leaves the queue, and one whose start failed is given
 * back for the next sweep, ours or another replica's, to take again at once.
 */

import { errorMessage } from "../errors.js";
import type { Logger } from "../log.js";
import type { BranchLease } from "./lease.js";

/** Branch workers the start queue starts at once. */
const SWEEP_WIDTH = 32;

/** A branch a sweep took, waiting for its branch worker to start. */
interface QueuedStart {
  lease: BranchLease;
  /** The branch's entry in `claiming` until its start ended. */
  started: Promise<void>;
  settle: () => void;
}

export interface StartQueueOptions {
  /** Branches being taken, by key (shared with the replica's own claims): one take at a time. */
  claiming: Map<string, Promise<void>>;
  /** Starts the branch's worker with the lease a sweep took. */
  start(key: string, lease: BranchLease): Promise<void>;
  /** The lease the branch's running worker holds, if one runs here. */
  runningLease(key: string): BranchLease | undefined;
  stopping(): boolean;
  log: Logger;
}

export class StartQueue {
  private readonly queue: QueuedStart[] = [];
  private running = 0;
  /** Leases a sweep took whose branch worker is not started yet: renewed with the others. */
  readonly starting = new Map<string, BranchLease>();

  constructor(private readonly o: StartQueueOptions) {}

  /**
   * Records the leases a sweep took (renewed from now on) and queues their branch workers' starts.
   * A branch a claim of ours took meanwhile is left to it.
   */
  add(taken: BranchLease[]): Array<Promise<void>> {
    const starts: Array<Promise<void>> = [];
    for (const lease of taken) {
      const key = lease.branchKey;
      const inflight = this.o.claiming.get(key);
      if (inflight) {
        // Our lease holds the claim's token; should the claim not start the branch, the next
        // sweep takes the lease again (same token, extended) and starts it.
        starts.push(inflight);
        continue;
      }
      const running = this.o.runningLease(key);
      if (running) {
        // Its worker's lease lapsed and we took the branch anew: that worker stops at its next
        // renewal, and the branch is taken again by the sweep after.
        if (running.token !== lease.token) void lease.release().catch(() => {});
        continue;
      }
      let settle = () => {};
      const started = new Promise<void>((r) => {
        settle = r;
      });
      this.o.claiming.set(key, started);
      this.starting.set(key, lease);
      this.queue.push({ lease, started, settle });
      starts.push(started);
    }
    this.pump();
    return starts;
  }

  /** The branch's worker started with `lease`: it is renewed with the running ones from now on. */
  started(key: string, lease: BranchLease): void {
    if (this.starting.get(key) === lease) this.starting.delete(key);
  }

  /** Takes a branch out of the queue (its lease lost). */
  drop(key: string): void {
    const i = this.queue.findIndex((q) => q.lease.branchKey === key);
    if (i < 0) return;
    const [queued] = this.queue.splice(i, 1) as [QueuedStart];
    this.settle(queued);
  }

  /** How many branches wait to start. */
  get waiting(): number {
    return this.queue.length;
  }

  /** The branches whose branch workers are starting now (out of the queue, not running yet). */
  underway(): string[] {
    const queued = new Set(this.queue.map((q) => q.lease.branchKey));
    return [...this.starting.keys()].filter((k) => !queued.has(k));
  }

  /**
   * Takes up to `count` branches out of the queue, the last queued first, and answers their
   * leases, still held: the caller gives them back (balancing, before they ever started here).
   */
  takeBack(count: number): BranchLease[] {
    const back = this.queue.splice(Math.max(0, this.queue.length - Math.max(0, count)));
    for (const q of back) this.settle(q);
    return back.map((q) => q.lease);
  }

  /** The replica stops: the leases of branches never started go back now, for another replica. */
  async releaseAll(): Promise<void> {
    const never = this.queue.splice(0);
    await Promise.all(
      never.map(async (q) => {
        await q.lease.release().catch(() => {});
        this.settle(q);
      }),
    );
  }

  /** Starts queued branch workers while fewer than SWEEP_WIDTH are starting. */
  private pump(): void {
    while (!this.o.stopping() && this.running < SWEEP_WIDTH) {
      const next = this.queue.shift();
      if (!next) return;
      this.running++;
      void this.startQueued(next).finally(() => {
        this.running--;
        this.pump();
      });
    }
  }

  private async startQueued(queued: QueuedStart): Promise<void> {
    const { lease } = queued;
    const key = lease.branchKey;
    try {
      if (lease.token) await this.o.start(key, lease);
    } catch (err) {
      this.o.log.warn({ branch: key, err: errorMessage(err) }, "starting the branch failed; leaving it");
      // Given back, so the next sweep (ours or another replica's) tries again at once.
      if (this.o.runningLease(key) !== lease) await lease.release().catch(() => {});
    } finally {
      this.settle(queued);
    }
  }

  private settle({ lease, started, settle }: QueuedStart): void {
    const key = lease.branchKey;
    if (this.starting.get(key) === lease) this.starting.delete(key);
    if (this.o.claiming.get(key) === started) this.o.claiming.delete(key);
    settle();
  }
}
