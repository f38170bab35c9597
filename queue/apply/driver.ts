/**
 * The shell around the decision core for one branch. It turns what the branch worker sees
 * (observations, decided and published writes, refusals, reports: worker-events.ts) and what the
 * cluster says (GitTargets, claims, appliers) into events, feeds them to `step` one at a time in
 * the order they happened, saves the state in Redis while the lease is held, and carries out the
 * actions: flush, send an attempt, record repairPending, log a collision, keep one wake-up timer.
 * The reads the core asks for (approvals, an overtaken operation's ancestry) are made by
 * approval-reads.ts, queued here like every event.
 *
 * Hooks only enqueue: the branch worker's loop never waits for a decision, and a flush asked of
 * it (which the worker carries out in its own loop, calling hooks on the way) cannot deadlock.
 */
import { randomBytes } from "node:crypto";
import type { Attempt, PhaseReport, Report, SupersededNotice } from "../contract.js";
import {
  ancestryReadsAsked,
  type DecisionAction,
  type DecisionEvent,
  type DecisionState,
  decisionsQuiet,
  initialState,
  operationsToCheck,
  step,
} from "../decide/index.js";
import type { BranchSpec } from "../directory.js";
import { errorMessage } from "../errors.js";
import { type KeysSecrets, SignatureReader } from "../governance/signatures.js";
import { applierField, claimField, type Logger } from "../log.js";
import type { BranchHooks, BranchWorker } from "../worker/branch-worker.js";
import { type Clock, systemClock } from "../worker/clock.js";
import type { BranchHistory } from "../worker/history.js";
import { postReportStatus, readAncestry, readApprovals } from "./approval-reads.js";
import { type AttemptSender, queuedAttempts, sendAttempt, unfinishedAttempts } from "./attempts-out.js";
import type { BranchListing, ObjectSource } from "./catalog.js";
import { ClaimStatusWrites } from "./claim-status-writes.js";
import { approvalReadsAsked } from "./governance.js";
import { type ApplyMetrics, noApplyMetrics } from "./metrics.js";
import type { DecisionStore } from "./store.js";
import { decisionHooks } from "./worker-events.js";

/** How often operations out are checked (`operationsToCheck`): a lost attempt ends within two. */
export const ATTEMPT_CHECK_MS = 5_000;

/** How often commit statuses awaited for approval are read again, by default. */
export const COMMIT_STATUS_POLL_MS = 15_000;

export type { AttemptSender } from "./attempts-out.js";

export interface DecisionDriverOptions {
  spec: BranchSpec;
  store: DecisionStore;
  /** The branch's lease: state is saved only while `token` still owns it. */
  lease: { readonly token: string | undefined; readonly fence?: number | undefined };
  /** The branch's GitTargets with their claims, appliers and sources, and the claims' status. */
  list(): Promise<BranchListing>;
  /** Where claims' status is written (repairPending). */
  objects: ObjectSource;
  sender: AttemptSender;
  log: Logger;
  clock?: Clock;
  metrics?: ApplyMetrics;
  /**
   * How often GitTargets are listed again without being told of a change (`relistSoon`); with a
   * change feed only a safety net. Default 5 s.
   */
  listIntervalMs?: number;
  /** A Stale report waits at most this long for the observation it asked for. Default 5 s. */
  staleObserveMs?: number;
  /** How often commit statuses awaited for approval are read again. Default 15 s. */
  commitStatusPollMs?: number;
  /** Asks the watch plane to collect a GitTarget's snapshots again (`recollectChannel`). */
  recollect?(target: { namespace: string; name: string }): Promise<void>;
  /**
   * Tells the sidecars an operation is superseded (`supersededKey`, `supersededChannel`): the one
   * following it ends it. Without it no operation is ended early.
   */
  supersede?(notice: SupersededNotice): Promise<void>;
  /** Where the keys Secrets of signature approval are read (the worker's cache); none: no key is trusted. */
  keys?: KeysSecrets;
}

type Task = () => Promise<void>;

/** When a write reached the inbox (its `acceptedAt`), as the decisions judge it; nothing when unreadable. */
const _arrivalOf = (acceptedAt: string): { arrivedAt?: number } => {
  const arrivedAt = Date.parse(acceptedAt);
  return Number.isFinite(arrivedAt) ? { arrivedAt } : {};
};

/** Why a wake-up timer was dropped: a newer one replaced it. */
const REPLACED = new Error("replaced by a newer wake-up");
/**
 * Why the listing's wait was cut short. Given as the reason, so a branch told of many changes at
 * once does not build (and capture the stack of) a DOMException at each: `abort()` without a
 * reason makes one even when the signal has already aborted.
 */
const RELIST = new Error("what the listing reads changed");

const folders = (l: BranchListing) => (l.folders ? { folders: l.folders } : {});

export class DecisionDriver {
  private s: DecisionState;
  private readonly clock: Clock;
  private readonly metrics: ApplyMetrics;
  private readonly log: Logger;
  /** What the driver asks of the branch worker: a flush, a verdict, a look at the remote, a save. */
  private worker: Pick<BranchWorker, "flush" | "judged" | "observeSoon" | "saved"> | undefined;
  /** The branch's history, read beside the worker's loop. */
  private history: BranchHistory | undefined;
  private readonly tasks: Task[] = [];
  private pumping: Promise<void> | undefined;
  private stopped = false;
  private saved = "";
  private listed = "";
  private readonly uids = new Map<string, string>();
  private wake = new AbortController();
  private readonly life = new AbortController();
  private nudge: AbortController | undefined;
  /** Stale reports held until the observation they asked for (the tip as it is then). */
  private heldStale: Report[] = [];
  private readonly claims: ClaimStatusWrites;
  /** The approval reads last asked for (JSON), so each is read once. */
  private commitsAsked = "";
  /** The ancestry reads asked for (token and tip), so each is read once. */
  private readonly ancestryAsked = new Set<string>();
  private statusPoll = false;
  private readonly signatures: SignatureReader;
  /** The hooks to give the branch worker: what it tells the decisions, queued as events. */
  readonly hooks: BranchHooks;
  /** Every attempt sent, in order (for tests and the playground's narration). */
  readonly sent: Attempt[] = [];
  /** The branch's spec as last listed: its GitProvider's current credentials and endpoints. */
  private spec: BranchSpec;

  constructor(private readonly o: DecisionDriverOptions) {
    this.spec = o.spec;
    this.clock = o.clock ?? systemClock;
    this.metrics = o.metrics ?? noApplyMetrics;
    this.signatures = new SignatureReader(o.keys);
    this.log = o.log.child({ branch: o.spec.key });
    this.claims = new ClaimStatusWrites(o.objects, () => this.clock.now(), this.log);
    const prefix = `f${o.lease.fence ?? 0}x${randomBytes(3).toString("hex")}`;
    this.s = initialState({ key: o.spec.key, repository: o.spec.remote.url, branch: o.spec.branch }, prefix);
    this.hooks = decisionHooks({
      feed: (event, saved) => this.feed(event, saved),
      uidOf: (t) => this.uidOf(t),
      mirror: (writeId) => void this.worker?.judged(writeId, true),
      saved: (entryId) => void this.worker?.saved(entryId),
      holdForObservation: (r) => {
        if (!this.worker) return false;
        this.heldStale.push(r);
        this.worker.observeSoon("notice");
        const signal = this.life.signal;
        void this.clock.sleep(this.o.staleObserveMs ?? 5000, signal).then(() => {
          if (!signal.aborted) this.releaseStale();
        });
        return true;
      },
      releaseHeld: () => this.releaseStale(),
      reported: (r) => postReportStatus(this.s, r, this.spec, this.log),
      log: this.log,
    });
  }

  /** The current decision state (a copy is not made: read only). */
  get state(): DecisionState {
    return this.s;
  }

  /**
   * Starts deciding for `worker`, reading the branch's `history`: restores the state (Redis, then
   * the claims' status) before any event the worker reports, so the first observation is a
   * baseline. Call before `worker.start()`.
   */
  start(
    worker: Pick<BranchWorker, "flush" | "judged" | "observeSoon" | "saved">,
    history: BranchHistory,
  ): void {
    this.worker = worker;
    this.history = history;
    this.tasks.unshift(() => this.restore());
    this.pump();
    void this.listLoop();
    void this.checkLoop();
  }

  /** Stops after the event being handled (its state saved); pending timers are dropped. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake.abort();
    this.life.abort();
    this.tasks.length = 0;
    await this.pumping;
    await this.claims.settled();
  }

  /**
   * No event waiting or being handled, and the decisions at rest (no attempt out, no apply window
   * open, no flush, no decided write unpublished): a hand-over now interrupts nothing.
   */
  quiet(): boolean {
    return (
      !this.pumping &&
      this.tasks.length === 0 &&
      this.heldStale.length === 0 &&
      decisionsQuiet(this.s, this.clock.now())
    );
  }

  /** Resolves when every event fed so far has been handled. */
  async idle(): Promise<void> {
    while (this.pumping) await this.pumping;
  }

  // ------------------------------------------------------------------------------------------

  /**
   * Queues an event; one given as a function is built when its turn comes (see `hooks`).
   * `saved` is called once the state after it is saved (not when the decisions stopped first).
   */
  private feed(event: DecisionEvent | (() => DecisionEvent), saved?: () => void): void {
    if (this.stopped) return;
    this.tasks.push(async () => {
      await this.handle(typeof event === "function" ? event() : event);
      if (!this.stopped) saved?.();
    });
    this.pump();
  }

  private pump(): void {
    if (this.pumping || this.stopped) return;
    this.pumping = (async () => {
      while (!this.stopped && this.tasks.length > 0) {
        const task = this.tasks.shift() as Task;
        try {
          await task();
        } catch (err) {
          this.log.error({ err }, "decision step failed");
        }
      }
    })().finally(() => {
      this.pumping = undefined;
      if (!this.stopped && this.tasks.length > 0) this.pump();
    });
  }

  private releaseStale(): void {
    for (const r of this.heldStale.splice(0)) this.feed({ type: "Report", report: r as PhaseReport });
  }

  private targetName(uid: string): string {
    const t = this.s.targets[uid];
    return t ? `${t.namespace}/${t.name}` : uid;
  }

  private uidOf(t: { namespace: string; name: string; uid?: string | undefined }): string {
    return this.uids.get(`${t.namespace}/${t.name}`) ?? t.uid ?? `${t.namespace}/${t.name}`;
  }

  private async restore(): Promise<void> {
    const saved = await this.o.store.load();
    // Before the claims: an attempt that ends between the two reads shows its end on its claim.
    const queued = saved ? await queuedAttempts(saved, this.o.sender, this.log) : [];
    const listing = await this.o.list();
    this.remember(listing);
    await this.handle({
      type: "Restarted",
      tokenPrefix: this.s.tokenPrefix,
      claims: listing.claims,
      ...(saved ? { saved } : {}),
      ...(queued.length > 0 ? { queued } : {}),
    });
    this.listed = JSON.stringify([listing.targets, listing.folders]);
    await this.handle({ type: "TargetsListed", targets: listing.targets, ...folders(listing) });
    this.log.info(
      {
        restored: saved !== undefined,
        targets: listing.targets.length,
        operationsOut: Object.values(this.s.appliers).filter((a) => a.operation).length,
        applyWindows: Object.values(this.s.appliers).reduce((n, a) => n + a.windows.length, 0),
      },
      "decisions started",
    );
  }

  private remember(listing: BranchListing): void {
    for (const t of listing.targets) this.uids.set(`${t.namespace}/${t.name}`, t.uid);
  }

  /** Lists again now: a GitTarget, claim, GitProvider or Secret of the branch changed. */
  relistSoon(): void {
    (this.nudge ??= new AbortController()).abort(RELIST);
  }

  private async listLoop(): Promise<void> {
    const every = this.o.listIntervalMs ?? 5000;
    while (!this.stopped) {
      // A change of what the listing reads (relistSoon) ends the wait; the period is a safety net.
      const nudge = (this.nudge ??= new AbortController());
      if (!nudge.signal.aborted)
        await this.clock.sleep(every, AbortSignal.any([this.life.signal, nudge.signal]));
      if (nudge.signal.aborted) this.nudge = undefined;
      if (this.stopped) return;
      this.tasks.push(async () => {
        // The queues are read before the claims: an attempt that ends between shows its end there.
        const checks = operationsToCheck(this.s, this.clock.now());
        const queued = checks.length > 0 ? await unfinishedAttempts(checks, this.o.sender) : undefined;
        let listing: BranchListing;
        try {
          listing = await this.o.list();
        } catch (err) {
          this.log.warn({ err: errorMessage(err) }, "listing GitTargets failed; keeping the last list");
          return;
        }
        this.remember(listing);
        // Operations out that a check reads (`readClaims`): an earlier owner's, or out long.
        if (checks.length > 0)
          await this.handle({ type: "ClaimsRead", claims: listing.claims, ...(queued ? { queued } : {}) });
        const sig = JSON.stringify([listing.targets, listing.folders]);
        if (sig === this.listed) return;
        this.listed = sig;
        await this.handle({ type: "TargetsListed", targets: listing.targets, ...folders(listing) });
      });
      this.pump();
    }
  }

  /**
   * Every `ATTEMPT_CHECK_MS`, while an operation out is due for a check (`operationsToCheck`), the
   * listing comes now: it reads the attempts queues and the claims for it.
   */
  private async checkLoop(): Promise<void> {
    while (!this.stopped) {
      await this.clock.sleep(ATTEMPT_CHECK_MS, this.life.signal);
      if (!this.stopped && operationsToCheck(this.s, this.clock.now()).length > 0) this.relistSoon();
    }
  }

  /** One step: decide, save while the lease is held, then carry out the actions in order. */
  private async handle(event: DecisionEvent): Promise<void> {
    const { state, actions } = step(this.s, event, this.clock.now());
    this.s = state;
    const json = JSON.stringify(state);
    if (json !== this.saved) {
      if (!(await this.o.store.save(this.o.lease.token, state, json))) {
        this.log.warn("lost the branch's lease; decisions stop before carrying anything out");
        this.stopped = true;
        this.wake.abort();
        this.life.abort();
        return;
      }
      this.saved = json;
    }
    for (const a of actions) await this.carry(a);
    this.readCommitsIfAsked();
    this.readAncestryIfAsked();
  }

  /**
   * An operation a foreign tip overtook needs the clone's answer: is its commit an ancestor of the
   * tip? Read from the clone (a task in line, like every event) and fed as `AncestryRead`, once per
   * operation and tip; a read that fails is fed as unknown, which ends nothing.
   */
  private readAncestryIfAsked(): void {
    const history = this.history;
    if (!history) return;
    for (const q of ancestryReadsAsked(this.s)) {
      const key = `${q.token}@${q.tip}`;
      if (this.ancestryAsked.has(key)) continue;
      this.ancestryAsked.add(key);
      if (this.ancestryAsked.size > 1000)
        this.ancestryAsked.delete(this.ancestryAsked.values().next().value as string);
      this.tasks.push(async () => {
        const ancestry = await readAncestry(history, q, this.log);
        await this.handle({ type: "AncestryRead", token: q.token, commit: q.commit, tip: q.tip, ancestry });
      });
      this.pump();
    }
  }

  /**
   * Appliers whose claim requires approval need the foreign commits since the commit they last
   * applied, for the tip now: read them from the clone (a task in line, like every event) and
   * feed them as `CommitsRead`. Until then the core holds them (`approvalGate`: Unread).
   */
  private readCommitsIfAsked(again = false): void {
    const asked = approvalReadsAsked(this.s, again);
    const sig = JSON.stringify(asked);
    // A read kept from before a restart that still waits (a commit status, a tag) is read again
    // after a while too: the poll is armed by reads, and none is asked for it now.
    if (asked.length === 0 && !again && this.history && approvalReadsAsked(this.s, true).length > 0)
      this.pollAgain();
    if (asked.length === 0 || (sig === this.commitsAsked && !again) || !this.history) return;
    this.commitsAsked = sig;
    const history = this.history;
    this.tasks.push(async () => {
      const { reads, waiting } = await readApprovals(
        { history, spec: () => this.spec, signatures: this.signatures, log: this.log },
        asked,
        this.s.published ?? [],
      );
      await this.handle({ type: "CommitsRead", reads });
      // A status the host has not turned success yet (a tag not pushed yet, a read that failed)
      // is read again after a while.
      if (waiting) this.pollAgain();
    });
    this.pump();
  }

  /** Reads the commits awaiting approval again after `commitStatusPollMs` (one timer at a time). */
  private pollAgain(): void {
    if (this.statusPoll) return;
    this.statusPoll = true;
    const signal = this.life.signal;
    void this.clock.sleep(this.o.commitStatusPollMs ?? COMMIT_STATUS_POLL_MS, signal).then(() => {
      this.statusPoll = false;
      if (!signal.aborted) this.readCommitsIfAsked(true);
    });
  }

  /** The branch's spec as listed now: later reads and posts use its credentials. */
  specChanged(spec: BranchSpec): void {
    this.spec = spec;
  }

  private async carry(a: DecisionAction): Promise<void> {
    switch (a.type) {
      case "Flush": {
        const worker = this.worker;
        if (!worker) return this.feed({ type: "FlushFailed", flush: a.flush });
        this.log.info({ flush: a.flush }, "an apply is due: flushing");
        // Not awaited: the worker runs the flush in its own loop and calls the hooks on the way;
        // the Published (or FlushFailed) answering it comes after every event those hooks feed.
        void worker.flush().then((r) =>
          this.feed(() =>
            r.ok && r.tip
              ? {
                  type: "Published",
                  upToMark: null,
                  tip: r.tip,
                  flush: a.flush,
                  folders: (r.folders ?? []).map((t) => this.uidOf(t)),
                  inboxMark: r.inboxMark,
                }
              : { type: "FlushFailed", flush: a.flush },
          ),
        );
        return;
      }
      case "SendAttempt":
        return this.send(a.attempt);
      case "RecordRepairPending":
        return this.claims.repairPending(a.claim, a.pending);
      case "RecordGate":
        return this.claims.gate(a.claim, a.gate);
      case "RecordReconcileHandled":
        this.log.info({ claim: claimField(a.claim), requestedAt: a.requestedAt }, "reconcile request taken");
        return this.claims.reconcileHandled(a.claim, a.requestedAt);
      case "RecordRetry":
        if (a.retry)
          this.log.info(
            {
              claim: claimField(a.claim),
              commit: a.retry.commit,
              attempt: a.retry.attempt,
              by: a.retry.by,
              at: new Date(a.retry.at).toISOString(),
            },
            "the claim waits for a retry",
          );
        return this.claims.retry(a.claim, a.retry);
      case "EndSuperseded": {
        const notice: SupersededNotice = {
          token: a.token,
          claim: a.claim,
          branchKey: this.o.spec.key,
          commit: a.commit,
          tip: a.tip,
          at: new Date(this.clock.now()).toISOString(),
        };
        this.log.info(
          {
            claim: claimField(a.claim),
            applier: applierField(a.applier),
            token: a.token,
            commit: a.commit,
            tip: a.tip,
          },
          "a newer tip supersedes the operation out: asking its executor to end it",
        );
        await this.o
          .supersede?.(notice)
          .catch((err: unknown) =>
            this.log.warn(
              { token: a.token, err: errorMessage(err) },
              "could not tell the sidecars the operation is superseded; it runs to its end",
            ),
          );
        return;
      }
      case "LogAttemptLost":
        this.metrics.attemptLost(a.applier.kind);
        this.log.warn(
          { claim: claimField(a.claim), applier: applierField(a.applier), token: a.token, commit: a.commit },
          "an attempt no queue held and no claim recorded ended AttemptLost; its reasons go again",
        );
        return;
      case "LogCollision":
        this.metrics.collision(a.applier.kind);
        this.log.warn(
          {
            object: a.object,
            applier: applierField(a.applier),
            claim: claimField(a.claim),
            commit: a.commit,
            token: a.token,
            target: a.targetUid,
          },
          "late apply over a newer edit withheld: Git keeps the edit, a Repair is due",
        );
        return;
      case "SettleWatchedWrite": {
        this.metrics.echo(a.applierKind ?? "none", a.verdict);
        this.log.debug({ write: a.writeId, verdict: a.verdict }, "watched applier write judged");
        this.worker?.judged(a.writeId, a.mirror);
        return;
      }
      case "SettleSnapshotWrite": {
        const target = this.targetName(a.targetUid);
        if (a.counted && (a.verdict === "discarded" || a.verdict === "used")) {
          this.metrics.staleSnapshot(a.verdict);
          if (a.verdict === "used")
            this.log.warn(
              { target },
              "a snapshot collected while Git was ahead is used: its GitTarget's snapshots were held 5 minutes",
            );
          else
            this.log.info(
              { target },
              "a snapshot collected while Git was ahead or across an apply is discarded; collected again after the apply",
            );
        }
        this.worker?.judged(a.writeId, a.use);
        return;
      }
      case "Recollect": {
        const t = a.target;
        this.log.info(
          { target: `${t.namespace}/${t.name}`, bound: a.bound },
          a.bound
            ? "snapshots held 5 minutes: asking the watch plane for a fresh one, to be used"
            : "Git is no longer ahead: asking the watch plane to collect the snapshots again",
        );
        await this.o
          .recollect?.({ namespace: t.namespace, name: t.name })
          .catch((err: unknown) =>
            this.log.warn(
              { target: `${t.namespace}/${t.name}`, err: errorMessage(err) },
              "could not ask for a recollection",
            ),
          );
        return;
      }
      case "ScheduleWake": {
        // A reason of our own: abort() without one builds a DOMException (and its stack) each time.
        this.wake.abort(REPLACED);
        this.wake = new AbortController();
        const signal = this.wake.signal;
        void this.clock.sleep(Math.max(0, a.at - this.clock.now()), signal).then(() => {
          if (!signal.aborted) this.feed({ type: "Tick" });
        });
        return;
      }
    }
  }

  private async send(attempt: Attempt): Promise<void> {
    const failed = await sendAttempt(this.o.sender, attempt, this.log, () => this.clock.now());
    if (failed) this.feed({ type: "Report", report: failed });
    else this.sent.push(attempt);
  }
}
