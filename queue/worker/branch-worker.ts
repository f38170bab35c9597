/**
 * The branch worker: the single writer of one repository branch while its replica holds the
 * branch's lease. It reads the branch's inbox in order, gathers writes into commit windows, keeps
 * every closed window as a pending write until a push carrying it lands, and publishes them with
 * compare-and-swap pushes on one retry schedule. Nothing here talks to Kubernetes: status goes
 * to a sink, decisions about applies to hooks.
 *
 * One loop owns all state (`BranchState`); everything else (wake-ups, flush requests, verdicts)
 * hands it work, so no two steps ever touch the checkout at once. A step is, in order:
 * read the inbox (reading.ts), carry out verdicts, close due windows into pending writes
 * (gathering.ts), read the remote (observation.ts), publish (publication.ts, with commit-content.ts
 * saying what each pending write becomes), settle what left (entry-ledger.ts), report
 * (target-status.ts). The history the decisions read (history.ts) is read beside the loop.
 */

import type { RefusedTarget, TargetSpec } from "../directory.js";
import type { Remote } from "../git/smart-http.js";
import {
  type BranchContext,
  type BranchState,
  type BranchWorkerOptions,
  type FlushResult,
  newBranchState,
  type PublishResult,
  remoteOf,
  underWay,
} from "./branch-state.js";
import { systemClock } from "./clock.js";
import * as ledger from "./entry-ledger.js";
import { announceDecided, closeWindows, updateTargets } from "./gathering.js";
import { type BranchHistory, branchHistory, foldersAt } from "./history.js";
import { nextStepAt } from "./idle.js";
import { Inbox, LostLeaseError } from "./inbox.js";
import { type FetchReason, noMetrics } from "./metrics.js";
import { observe } from "./observation.js";
import { failed, publish, syncIntake } from "./publication.js";
import { applyVerdicts, drainInbox, settleSnapshotMarks } from "./reading.js";
import { reportStatus, retained } from "./target-status.js";
import { nextWindowDeadline } from "./windows.js";

export type {
  BranchHooks,
  BranchWorkerOptions,
  FlushResult,
  FolderFacts,
  HeldWrite,
  Observation,
  PendingWrite,
  PublishedWrites,
  TargetName,
  WriteDecided,
} from "./branch-state.js";

/** Why a branch worker's sleep ended early: it was woken. */
const WAKE_REASON = new Error("woken");

export class BranchWorker {
  readonly key: string;
  /** The branch's history as the decisions read it, beside the loop. */
  readonly history: BranchHistory;
  private readonly ctx: BranchContext;
  private readonly s: BranchState;
  private wakeCtl = new AbortController();
  /** Aborts every Git call under way when the worker stops, so a stalled remote cannot hold it. */
  private readonly stopCtl = new AbortController();
  private loop: Promise<void> | undefined;

  constructor(private readonly o: BranchWorkerOptions) {
    this.key = o.spec.key;
    const lease = o.lease;
    this.ctx = {
      o,
      key: o.spec.key,
      inbox: new Inbox(o.redis, o.prefix, o.spec.key),
      clock: o.clock ?? systemClock,
      metrics: o.metrics ?? noMetrics,
      log: o.log.child({ branch: o.spec.key }),
      hooks: o.hooks ?? {},
      stopSignal: this.stopCtl.signal,
      token: () => {
        const t = lease.token;
        if (!t) throw new LostLeaseError(`lost the lease of ${o.spec.key}`);
        return t;
      },
    };
    const s = newBranchState(o.spec);
    this.s = s;
    this.history = branchHistory(
      o.repo,
      () => remoteOf(this.ctx, s),
      async () => {
        const tip = s.remoteTip;
        return tip ? { tip, present: await foldersAt(o.repo, s, tip, s.targets, this.ctx.log) } : undefined;
      },
    );
  }

  // ------------------------------------------------------------------------------------------
  // Public surface

  start(): void {
    this.loop ??= this.run();
  }

  /** New work may be waiting (a signal, a notice): look now instead of at the next poll. */
  wake(): void {
    // A reason of our own: abort() without one builds a DOMException (and its stack) per wake.
    this.wakeCtl.abort(WAKE_REASON);
  }

  /** Stops after the current step; nothing pending is lost (it stays in the inbox). */
  async stop(): Promise<void> {
    this.s.stopped = true;
    this.stopCtl.abort(new Error("the branch worker is stopping"));
    this.wake();
    await this.loop;
    await this.s.status.writing;
    for (const resolve of this.s.flushes.splice(0)) resolve({ ok: false, cause: "worker stopped" });
  }

  /**
   * Nothing under way that a hand-over would interrupt (`underWay` names what is). Balancing
   * hands over only a quiet branch (docs/design/balancing.md).
   */
  quiet(): boolean {
    return underWay(this.s).length === 0;
  }

  /**
   * Nothing done yet but waiting for its first read of the remote (for a baseline slot): a
   * hand-over now costs no read, and balancing gives such a branch back at once.
   */
  awaitingFirstRead(): boolean {
    // Before its first read begins, the one thing under way is that read.
    return !this.s.firstReadBegun && underWay(this.s).length === 1;
  }

  /**
   * The last inbox entry id this worker read ("0" before its first read): an entry after it is
   * news the worker has not seen, which the replica's inbox check wakes it for.
   */
  get readMark(): string {
    return this.s.lastEntryId;
  }

  get running(): boolean {
    return this.loop !== undefined && !this.s.stopped;
  }

  /** Resolves when the loop ended by itself (lost lease, stop). */
  get done(): Promise<void> {
    return this.loop ?? Promise.resolve();
  }

  /**
   * Closes every open window and publishes every pending write at once, ignoring the cooldown.
   * Resolves with the tip that publication produced (the remote tip when there was nothing to
   * publish).
   */
  flush(): Promise<FlushResult> {
    return new Promise((resolve) => {
      this.s.flushes.push(resolve);
      this.wake();
    });
  }

  /**
   * The branch's GitTargets as they are now. A GitTarget that became suspended keeps the writes of
   * its open window (and every later one) frozen: accepted and charged to the intake budget, never
   * decided or published. One that resumed has them gathered into windows again, in order.
   */
  updateTargets(
    targets: TargetSpec[],
    more: { refused?: RefusedTarget[]; baseBranch?: string | undefined; remote?: Remote } = {},
  ): void {
    updateTargets(this.ctx, this.s, targets, more);
    this.wake();
  }

  /**
   * The decision core's judgement of a write held since the inbox: `mirror` sends it on (to its
   * commit window, or a snapshot's applier write on to the apply window's judgement), otherwise
   * its entry is settled without a commit (the apply landing, a late apply withheld, a stale
   * snapshot discarded).
   */
  judged(writeId: string, mirror: boolean): void {
    this.s.verdicts.push({ writeId, mirror });
    this.wake();
  }

  /** The state after an entry handed on is saved (`savesEntries`): the entry may leave the inbox. */
  saved(entryId: string): void {
    ledger.saved(this.s.ledger, entryId);
    this.wake();
  }

  /** Watched applier writes not judged yet (for tests and status). */
  get judgingCount(): number {
    return this.s.judging.size;
  }

  /** Asks for one observation of the remote (a push notice is only a hint to look). */
  observeSoon(reason: FetchReason = "notice"): void {
    this.s.observeAsked = reason;
    this.wake();
  }

  snapshot() {
    const s = this.s;
    const kept = retained(s.held);
    return {
      branchKey: this.key,
      retainedWrites: kept.writes,
      retainedBytes: kept.bytes,
      ...(kept.oldestAt !== undefined ? { oldestRetainedAt: kept.oldestAt } : {}),
      ...(s.retry ? { nextRetryAt: s.retry.nextAt, retryingSince: s.retry.since } : {}),
      intakePaused: s.paused,
      ...(s.intake ? { chargedBytes: s.intake.chargedBytes } : {}),
      remoteTip: s.remoteTip,
      pendingWrites: s.pending.length,
      openWindows: s.windows.size,
      frozenWrites: [...s.frozen.values()].reduce((n, w) => n + w.length, 0),
      /** The watch plane's `done` markers read, waiting for the writes before them. */
      snapshotMarks: s.snapshotMarks.length,
      lastCause: s.retry?.lastCause,
    };
  }

  // ------------------------------------------------------------------------------------------
  // The loop

  private async run(): Promise<void> {
    const { ctx, s } = this;
    const pollMs = this.o.pollMs ?? 1000;
    while (!s.stopped) {
      this.wakeCtl = new AbortController();
      try {
        await this.step();
      } catch (err) {
        if (err instanceof LostLeaseError) {
          ctx.log.warn({ err: err.message }, "lost the branch; stopping before the next push");
          s.stopped = true;
          break;
        }
        ctx.log.error({ err }, "branch worker step failed");
        await ctx.clock.sleep(pollMs, this.wakeCtl.signal);
        continue;
      }
      if (s.stopped) break;
      if (s.flushes.length > 0) continue;
      const now = ctx.clock.now();
      const next = nextStepAt({
        now,
        pollMs,
        idlePollMs: this.o.idlePollMs ?? pollMs,
        windowDeadline: nextWindowDeadline(s.windows),
        pendingWrites: s.pending.length,
        nextFetchAt: s.nextFetchAt,
        retryAt: s.retry?.nextAt,
        intakePaused: s.paused,
        autoPublish: this.autoPublishing(),
        lastPushAt: s.lastPushAt,
        pushCooldownMs: this.o.pushCooldownMs ?? 0,
      });
      if (next > now) await ctx.clock.sleep(next - now, this.wakeCtl.signal);
    }
  }

  private autoPublishing(): boolean {
    return this.o.autoPublish !== false;
  }

  private async step(): Promise<void> {
    const { ctx, s } = this;
    await drainInbox(ctx, s);
    const now = ctx.clock.now();
    await applyVerdicts(ctx, s, now);
    ledger.settleSaved(s.ledger);
    const retryDue = !s.retry || now >= s.retry.nextAt;
    const flushes = s.flushes.splice(0);
    if (flushes.length > 0) {
      // Every write read so far is closed into this publication.
      const inboxMark = s.lastEntryId === "0" ? "0-0" : s.lastEntryId;
      closeWindows(ctx, s, now, true);
      await announceDecided(ctx, s);
      // One retry clock: while a failed publication waits for its retry, a flush spends no push.
      const result: PublishResult =
        s.retry && !retryDue
          ? {
              ok: false,
              cause: `publication waits for its retry at ${new Date(s.retry.nextAt).toISOString()}`,
            }
          : await publish(ctx, s, true);
      for (const resolve of flushes) resolve(result.ok ? { ...result, inboxMark } : result);
    } else {
      closeWindows(ctx, s, now);
      await announceDecided(ctx, s);
      const wantObserve =
        !s.baselined || s.observeAsked !== undefined || (now >= s.nextFetchAt && s.pending.length === 0);
      if (wantObserve && retryDue) {
        const reason = !s.baselined ? "baseline" : (s.observeAsked ?? "periodic");
        s.observeAsked = undefined;
        try {
          await observe(ctx, s, reason);
        } catch (err) {
          failed(ctx, s, err, "observe");
        }
      }
      const cooled = now >= s.lastPushAt + (this.o.pushCooldownMs ?? 0);
      // An observation that just failed was this retry's attempt: the push waits for the next one.
      const stillDue = !s.retry || now >= s.retry.nextAt;
      if (s.pending.length > 0 && this.autoPublishing() && (s.retry ? stillDue : cooled)) {
        await publish(ctx, s, false);
      }
    }
    await syncIntake(ctx, s);
    // A mark settled now gives its marker's entry to the settle just after it.
    await settleSnapshotMarks(ctx, s);
    await ledger.settle(s.ledger, ctx.inbox, ctx.token);
    reportStatus(ctx, s);
  }
}
