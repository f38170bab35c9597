/**
 * The branch worker: the single writer of one repository branch while its replica holds the
 * branch's lease. It reads the branch's inbox in order, gathers writes into commit windows, keeps
 * every closed window as a pending write until a push carrying it lands, and publishes them with
 * compare-and-swap pushes on one retry schedule. Nothing here talks to Kubernetes: status goes
 * to a sink, decisions about applies to hooks.
 *
 * One loop owns all state; everything else (wake-ups, flush requests) hands it work, so no two
 * steps ever touch the checkout at once.
 */
import type { Redis } from "ioredis";
import { parse as parseYaml } from "yaml";
import {
  AcceptedWrite,
  type ObjectRef,
  PushNotice,
  RefusalNotice,
  Report,
  type SnapshotSweep,
  type WriteChange,
} from "../contract.js";
import { StatusReason } from "../crds/reasons.js";
import { type AncestryOf, cloneAncestry } from "../git/ancestry.js";
import { cleanObject, objectPath, objectYaml, refOf } from "../git/layout.js";
import type { BareRepo, FileChange, RemoteTag } from "../git/repo.js";
import { advertise, GitRemoteError, PushRejectedError, type Remote } from "../git/smart-http.js";
import { type SweptFile, sweepDeletes, sweptDirs } from "../git/sweep.js";
import type { Logger } from "../log.js";
import { isMap, mergedObject } from "../object-merge.js";
import { checkChanges, checkScope, refOfChange } from "../scope.js";
import { objectRefProblem, writeProblem } from "../write-check.js";
import { type Clock, systemClock } from "./clock.js";
import type { BranchSpec, RefusedTarget, TargetSpec } from "./directory.js";
import { nextStepAt } from "./idle.js";
import { compareEntryIds, Inbox, type InboxEntry, LostLeaseError, type SettledEntry } from "./inbox.js";
import { DEFAULT_INTAKE_BUDGET_BYTES, writeCharge } from "./intake-budget.js";
import type { BranchLease } from "./lease.js";
import { type FetchReason, noMetrics, type WorkerMetrics } from "./metrics.js";
import { afterFailure, contentionBackoff, type RetryState } from "./retry.js";
import type { Slots } from "./slots.js";
import type { PublicationReport, StatusSink, WriteRefusal } from "./status.js";
import { recordTip } from "./tip-record.js";
import { addToWindow, DEFAULT_WINDOW, dueWindows, nextWindowDeadline, type OpenWindow } from "./windows.js";

/** Trailer naming each write a commit carries: how any owner recognises a write already landed. */
export const WRITE_TRAILER = "Applygate-Write";

export interface HeldWrite {
  write: AcceptedWrite;
  entryId: string;
  charge: number;
  /**
   * The remote tip when the worker read the write from its inbox. A snapshot's object with no
   * base names its change against that tip's file, so a push that lands while the write waits for
   * its commit is not undone by the object the snapshot saw before it (soak --mirror seed 31042).
   */
  tipWhenRead?: string;
}

/** A closed window: one commit's worth of writes, kept until a push carrying it lands. */
export interface PendingWrite {
  seq: number;
  target: string;
  writes: HeldWrite[];
  closedAt: number;
  /** Inbox entry id of its last write when the window closed: how the hooks name it. */
  entryId?: string;
}

/** A GitTarget as the hooks name it. */
export interface TargetName {
  namespace: string;
  name: string;
  uid?: string;
}

/** What the worker read in the tree of one commit: the GitTargets whose folder it holds. */
export interface FolderFacts {
  tip: string;
  present: TargetName[];
}

export interface Observation {
  tip: string | undefined;
  previous: string | undefined;
  /** The GitTargets whose folder the tip's tree holds (none when the branch does not exist). */
  folders?: TargetName[];
  /** The tip is a commit this worker pushed (nothing to do). */
  pushedByUs: boolean;
  /** First observation since this worker started: a baseline, never a foreign commit. */
  baseline: boolean;
  reason: FetchReason;
}

/** A pending write was decided (a window closed): what the decisions are told of it. */
export interface WriteDecided {
  /** Inbox entry id of its last write: unique and ordered. */
  entryId: string;
  target: { namespace: string; name: string; uid?: string };
  /** Upserts of objects the folder did not hold at the remote tip when the window closed. */
  createdObjects: ObjectRef[];
  /**
   * Every object the write changes, with when the edit happened on the cluster and when the write
   * carrying it was accepted into the inbox (both RFC 3339).
   */
  editedObjects: Array<{ ref: ObjectRef; editedAt: string; acceptedAt: string }>;
}

export interface PublishedWrites {
  tip: string;
  /** The GitTargets whose folder the tip's tree holds. */
  folders?: TargetName[];
  /** Entry ids of the pending writes this publication carried, in decided order. */
  entryIds: string[];
}

export interface BranchHooks {
  onObserved?(o: Observation): void | Promise<void>;
  /** A window closed into a pending write (called before any publication carrying it). */
  onWriteDecided?(w: WriteDecided): void | Promise<void>;
  /** A push carrying pending writes landed, or found the remote already at our head. */
  onPublished?(p: PublishedWrites): void | Promise<void>;
  /**
   * A refusal notice. `entryId` names the inbox entry it came in (none for a write the worker
   * refused itself); with `savesEntries`, that entry stays in the inbox until `saved(entryId)`.
   */
  onRefusal?(notice: RefusalNotice, entryId?: string): void | Promise<void>;
  onReport?(report: Report): void | Promise<void>;
  /** Writes that can no longer be applied (settled, never committed). */
  onRefused?(write: AcceptedWrite, reason: string): void | Promise<void>;
  /**
   * A watched write of the applier's own managers (`applierAuthored`) waits for the decision core's
   * judgement: it joins a commit window only once `judged(write.id, true)` says so. Without this
   * hook such a write is an edit like any other.
   */
  onWatchedApplierWrite?(write: AcceptedWrite): void | Promise<void>;
  /**
   * A write of a snapshot that is not initial (`write.snapshot`) waits for the decision core's
   * judgement: `judged(write.id, true)` uses it, `false` discards it (collected while Git was
   * ahead or across an apply). Without this hook every snapshot write is used.
   */
  onSnapshotWrite?(write: AcceptedWrite): void | Promise<void>;
  /** The watch plane started the initial snapshots of a GitTarget for the round `token`. */
  onInitialSnapshotsStarted?(p: { target: TargetName; token: string }): void | Promise<void>;
  /**
   * Every write the inbox held before the watch plane's `done` marker of `token` for this
   * GitTarget is settled (published, discarded or refused): its initial snapshots are in Git. With
   * `savesEntries`, the marker's entry (`entryId`) stays in the inbox until `saved(entryId)`.
   */
  onInitialSnapshotsPublished?(p: {
    target: TargetName;
    token: string;
    entryId: string;
  }): void | Promise<void>;
  /**
   * The hooks' owner only queues what it is handed and calls `saved(entryId)` once its state after
   * an entry's event is saved: a `done` marker's and a refusal notice's entry stay in the inbox
   * until then, so an owner that stops (dropping what it queued) or dies before the save leaves
   * them to the next owner. Without it they leave once handed on.
   */
  savesEntries?: boolean;
}

type PublishResult =
  | { ok: true; tip: string | undefined; folders?: TargetName[] }
  | { ok: false; cause: string };

export type FlushResult =
  | {
      ok: true;
      tip: string | undefined;
      folders?: TargetName[];
      /**
       * The last inbox entry read when the flush closed the windows ("0-0" when none ever was), or
       * the flush's mark when one was asked and is earlier: every write accepted up to it is
       * published in `tip`, refused or frozen; a write after it may not be.
       */
      inboxMark: string;
    }
  | { ok: false; cause: string };

export interface BranchWorkerOptions {
  spec: BranchSpec;
  redis: Redis;
  prefix: string;
  lease: BranchLease;
  repo: BareRepo;
  log: Logger;
  clock?: Clock;
  status?: StatusSink;
  metrics?: WorkerMetrics;
  hooks?: BranchHooks;
  budgetBytes?: number;
  /** Periodic read of the remote tip. */
  fetchIntervalMs?: number;
  /**
   * Deadline of a whole publication cycle (fetch, replay, push, contention retries), checked
   * throughout: a Git call under way when it passes is abandoned.
   */
  pushCycleTimeoutMs?: number;
  maxContentionRetries?: number;
  /** Minimum gap between two pushes the worker starts by itself (a flush ignores it). */
  pushCooldownMs?: number;
  /**
   * Longest sleep while publication retries or intake is paused, and the wait after a step that
   * failed (default 1 s). Also the longest idle sleep unless `idlePollMs` says otherwise.
   */
  pollMs?: number;
  /**
   * Longest sleep of an idle branch (no retry pending, no deadline of its own: commit window,
   * fetch, cooldown): its read of the inbox when no wake-up arrives. Default `pollMs`; a replica
   * sets it far longer (DEFAULT_IDLE_POLL_MS), as its inbox check wakes the worker for news.
   */
  idlePollMs?: number;
  /**
   * Bounds the first reads of the remote (the baselines) the replica's branch workers make at
   * once; each holds a slot for its read and download.
   */
  baselineSlots?: Slots;
  /** Publish closed windows by itself; false leaves publication to flush(). */
  autoPublish?: boolean;
  committer?: { name: string; email: string };
  random?: () => number;
  /**
   * Reads the branch's spec again (GitTargets and their scopes), asked before a write is refused
   * as out of scope, so a ScopeGrant or GitTarget made after the worker started counts.
   */
  refreshSpec?: () => Promise<BranchSpec | undefined>;
}

/** Whether two remotes are the same URL with the same credentials and policy. */
function sameRemote(a: Remote, b: Remote): boolean {
  return (
    a.url === b.url &&
    a.auth?.username === b.auth?.username &&
    a.auth?.password === b.auth?.password &&
    (a.allowHttpCredentials === true) === (b.allowHttpCredentials === true) &&
    a.timeoutMs === b.timeoutMs
  );
}

/** Least time between two rereads of the spec a refused write asks for. */
const SPEC_REFRESH_GAP_MS = 1000;

interface Built {
  base: string | undefined;
  commits: Array<{
    pending: PendingWrite;
    commit: string | undefined;
    carriedBy: string | undefined;
    newOids: string[];
  }>;
}

/** Why a branch worker's sleep ended early: it was woken. */
const WAKE_REASON = new Error("woken");

export class BranchWorker {
  readonly key: string;
  private readonly inbox: Inbox;
  private readonly clock: Clock;
  private readonly metrics: WorkerMetrics;
  private readonly log: Logger;
  private lastEntryId = "0";
  private readonly held = new Map<string, HeldWrite>();
  /** Writes held until the decision core judged them (a snapshot's, a watched applier write), by write id. */
  private readonly judging = new Map<string, HeldWrite & { stage: "snapshot" | "applier" }>();
  /** The watch plane's initial-snapshot markers read, waiting for every write before them to settle. */
  /**
   * `done` markers read, waiting for the writes before them to be published. A marker's entry
   * stays in the inbox until then, so a new owner of the branch reads it again: were it settled
   * on reading, an owner that stopped before the publication would take the mark with it and the
   * GitTarget would stay behind the barrier until the mirror's next round.
   */
  private snapshotMarks: Array<{ target: TargetName; token: string; entryId: string; charge: number }> = [];
  /**
   * Entries handed to hooks that save them (`savesEntries`), by entry id with their charge: each
   * leaves the inbox once `saved` says so. Settled on the handing alone, a stop before the save
   * lost a `done` marker's mark and held its GitTarget behind the barrier for good (soak --mirror
   * seed 131015).
   */
  private readonly awaitingSave = new Map<string, number>();
  private savedEntries: string[] = [];
  private verdicts: Array<{ writeId: string; mirror: boolean }> = [];
  private readonly windows = new Map<string, OpenWindow<HeldWrite>>();
  private pending: PendingWrite[] = [];
  private seq = 0;
  private built: Built = { base: undefined, commits: [] };
  private remoteTip: string | undefined;
  private baselined = false;
  private readonly pushedByUs = new Set<string>();
  private retry: RetryState | undefined;
  private paused = false;
  /** What the intake gate was last told (budget, retry pending) and held (charged bytes). */
  private intake: { budget: number; retrying: boolean; chargedBytes: number } | undefined;
  private lastPushAt = Number.NEGATIVE_INFINITY;
  private lastPublishedAt: number | undefined;
  private nextFetchAt = 0;
  private observeAsked: FetchReason | undefined;
  /** The commit the last push notice names, for the next observation's download. */
  private noticeHint: string | undefined;
  private flushes: Array<{ mark: string | undefined; resolve: (r: FlushResult) => void }> = [];
  private wakeCtl = new AbortController();
  /** Aborts every Git call under way when the worker stops, so a stalled remote cannot hold it. */
  private readonly stopCtl = new AbortController();
  /** The publication cycle under way: its Git calls end when its deadline passes. */
  private cycleSignal: AbortSignal | undefined;
  private stopped = false;
  private loop: Promise<void> | undefined;
  private lastReport = "";
  /** GitTargets the last report was written to: one listed since gets it without waiting for news. */
  private reportedTo = new Set<string>();
  /** The status report being written (reportStatus), and whether another waits behind it. */
  private statusWriting: Promise<void> = Promise.resolve();
  private statusQueued = false;
  /** Settled entries of notices and refused writes, removed with the next settle. */
  private doneEntries: SettledEntry[] = [];
  /** Windows closed since the last announcement to onWriteDecided. */
  private decided: PendingWrite[] = [];
  /** The branch's GitTargets as last read (the spec at takeover, then every `updateTargets`). */
  private targets: TargetSpec[];
  /** GitTargets naming the branch that may not write it (their GitProvider does not admit them). */
  private refusedSpecs: RefusedTarget[];
  /** Where a branch that does not exist yet starts (the `spec.baseBranch` named). */
  private baseBranch: string | undefined;
  /** The commit a branch that does not exist yet is built on, read at each publication. */
  private startFrom: string | undefined;
  /** Why publication retries, when it is something the GitTargets should say (BaseBranchMissing). */
  private retryReason: string | undefined;
  /** Writes of suspended GitTargets, in arrival order: held, charged, never decided or published. */
  private readonly frozen = new Map<string, HeldWrite[]>();
  /** Writes settled as refused, recorded with the next settle. */
  private refusedWrites: Array<{ id: string; reason: string }> = [];
  /** GitTargets whose last settled write was refused (WriteRefused True until one publishes). */
  private readonly refusedTargets = new Set<string>();
  private specReadAt = Number.NEGATIVE_INFINITY;
  /**
   * The GitProvider's remote as last listed: its current credentials. A rotated, added or removed
   * credential is used (or no longer used) from the next Git call on.
   */
  private remoteNow: Remote;
  /** The last read of a tip's folders, kept while the tip and the GitTargets' folders are the same. */
  private folderRead: { key: string; present: TargetName[] } | undefined;

  constructor(private readonly o: BranchWorkerOptions) {
    this.key = o.spec.key;
    this.targets = o.spec.targets;
    this.refusedSpecs = o.spec.refused ?? [];
    this.baseBranch = o.spec.baseBranch;
    this.remoteNow = o.spec.remote;
    this.inbox = new Inbox(o.redis, o.prefix, o.spec.key);
    this.clock = o.clock ?? systemClock;
    this.metrics = o.metrics ?? noMetrics;
    this.log = o.log.child({ branch: o.spec.key });
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
    this.stopped = true;
    this.stopCtl.abort(new Error("the branch worker is stopping"));
    this.wake();
    await this.loop;
    await this.statusWriting;
    for (const f of this.flushes.splice(0)) f.resolve({ ok: false, cause: "worker stopped" });
  }

  /**
   * Nothing under way that a hand-over would interrupt: the first read of the remote done, no write
   * held (in a window, pending, frozen or being judged), no publication under way or retrying, no
   * flush asked. Balancing hands over only a quiet branch (docs/design/balancing.md).
   */
  quiet(): boolean {
    return (
      this.baselined &&
      this.held.size === 0 &&
      this.judging.size === 0 &&
      this.awaitingSave.size === 0 &&
      this.pending.length === 0 &&
      this.windows.size === 0 &&
      this.frozen.size === 0 &&
      this.flushes.length === 0 &&
      this.cycleSignal === undefined &&
      this.retry === undefined &&
      this.observeAsked === undefined
    );
  }

  /**
   * The last inbox entry id this worker read ("0" before its first read): an entry after it is
   * news the worker has not seen, which the replica's inbox check wakes it for.
   */
  get readMark(): string {
    return this.lastEntryId;
  }

  get running(): boolean {
    return this.loop !== undefined && !this.stopped;
  }

  /** Resolves when the loop ended by itself (lost lease, stop). */
  get done(): Promise<void> {
    return this.loop ?? Promise.resolve();
  }

  /**
   * Closes every open window holding a write up to `mark` (an inbox entry id; all when omitted)
   * and publishes every pending write at once, ignoring the cooldown. Resolves with the tip that
   * publication produced (the remote tip when there was nothing to publish).
   */
  flush(mark?: string): Promise<FlushResult> {
    return new Promise((resolve) => {
      this.flushes.push({ mark, resolve });
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
    const was = new Set(this.targets.filter((t) => t.suspended).map((t) => `${t.namespace}/${t.name}`));
    this.targets = targets;
    if ("refused" in more) this.refusedSpecs = more.refused ?? [];
    if ("baseBranch" in more) this.baseBranch = more.baseBranch;
    const now = this.clock.now();
    if (more.remote && !sameRemote(more.remote, this.remoteNow)) {
      this.remoteNow = more.remote;
      this.log.info(
        { credentials: more.remote.auth ? "present" : "none" },
        "the GitProvider's remote or credentials changed: used from the next Git call",
      );
      // A publication retrying (a refused credential, most likely) is tried again at once.
      if (this.retry) this.retry = { ...this.retry, nextAt: now };
    }
    for (const t of targets) {
      const key = `${t.namespace}/${t.name}`;
      if (t.suspended && !was.has(key)) {
        const open = this.windows.get(key);
        if (open) {
          this.windows.delete(key);
          this.frozen.set(key, [...open.writes, ...(this.frozen.get(key) ?? [])]);
        }
      }
    }
    for (const [key, writes] of [...this.frozen]) {
      if (this.isSuspended(key)) continue;
      this.frozen.delete(key);
      for (const h of writes) this.addWrite(h, now);
    }
    this.wake();
  }

  private isSuspended(target: string): boolean {
    return this.targets.some((t) => t.suspended === true && `${t.namespace}/${t.name}` === target);
  }

  /**
   * The decision core's judgement of a write held since the inbox: `mirror` sends it on (to its
   * commit window, or a snapshot's applier write on to the apply window's judgement), otherwise
   * its entry is settled without a commit (the apply landing, a late apply withheld, a stale
   * snapshot discarded).
   */
  judged(writeId: string, mirror: boolean): void {
    this.verdicts.push({ writeId, mirror });
    this.wake();
  }

  /** Watched applier writes not judged yet (for tests and status). */
  get judgingCount(): number {
    return this.judging.size;
  }

  /** Asks for one observation of the remote (a push notice is only a hint to look). */
  observeSoon(reason: FetchReason = "notice"): void {
    this.observeAsked = reason;
    this.wake();
  }

  /**
   * The parents of a commit the clone holds (an observed or published history): for the
   * decisions' approval walk. Reads only immutable objects, so it may run beside the loop.
   */
  async parentsOf(oid: string): Promise<string[]> {
    return (await this.o.repo.readCommit(oid)).parents;
  }

  /**
   * Whether `revision` is a proper ancestor of `commit` in the clone: the decisions' proof that a
   * newer tip supersedes an operation. Reads only immutable objects, so it may run beside the loop.
   */
  ancestry(revision: string, commit: string): ReturnType<AncestryOf> {
    this.ancestryOf ??= cloneAncestry(this.o.repo.gitdir, this.o.repo.cache);
    return this.ancestryOf(revision, commit);
  }
  private ancestryOf: AncestryOf | undefined;

  /** A commit object's bytes, for the decisions' signature check (immutable: may run beside the loop). */
  async rawCommitOf(oid: string): Promise<Uint8Array> {
    return this.o.repo.readRawCommit(oid);
  }

  /**
   * The tags of the repository pointing at one of `commits` (one read of `refs/tags/`), with the tag
   * objects of the annotated ones downloaded when the clone lacks them: for the decisions'
   * signature check in a tag mode. Only then are tags read; the clone keeps no tag refs.
   */
  async tagsAt(
    commits: readonly string[],
    keep: (name: string) => boolean = () => true,
  ): Promise<RemoteTag[]> {
    const on = new Set(commits);
    const tags = (await this.o.repo.remoteTags(this.remote())).filter(
      (t) => on.has(t.commit) && keep(t.name),
    );
    const objects = tags.filter((t) => t.annotated).map((t) => t.object);
    await this.o.repo.fetchObjects(this.remote(), objects, commits.slice(0, 1));
    return tags;
  }

  /** A tag object's bytes (immutable: may run beside the loop). */
  async rawTagOf(oid: string): Promise<Uint8Array> {
    return this.o.repo.readRawTag(oid);
  }

  /**
   * Which GitTargets have their folder in the tree of the tip this worker last observed or
   * published: the proof the decisions' barrier asks for. Undefined while the branch does not
   * exist. Reads only immutable objects already in the clone, so it may run beside the loop.
   */
  async folders(): Promise<FolderFacts | undefined> {
    const tip = this.remoteTip;
    return tip ? { tip, present: await this.foldersAt(tip) } : undefined;
  }

  private async foldersAt(tip: string | undefined): Promise<TargetName[]> {
    if (!tip) return [];
    const targets = this.targets;
    const key = JSON.stringify([tip, targets.map((t) => [t.namespace, t.name, t.uid, t.path])]);
    if (this.folderRead?.key === key) return this.folderRead.present;
    let has: boolean[] = [];
    try {
      has = await this.o.repo.hasFolders(
        tip,
        targets.map((t) => t.path),
      );
    } catch (err) {
      // Unreadable is not proven: the barrier holds, as for a folder that is not there.
      this.log.warn({ err: (err as Error).message, commit: tip }, "could not read the tip's tree");
    }
    const present = targets
      .filter((_, i) => has[i] === true)
      .map((t) => ({ namespace: t.namespace, name: t.name, ...(t.uid ? { uid: t.uid } : {}) }));
    this.folderRead = { key, present };
    return present;
  }

  snapshot() {
    let bytes = 0;
    let oldest: number | undefined;
    for (const h of this.held.values()) {
      bytes += h.charge;
      const at = Date.parse(h.write.acceptedAt);
      if (!Number.isNaN(at) && (oldest === undefined || at < oldest)) oldest = at;
    }
    return {
      branchKey: this.key,
      retainedWrites: this.held.size,
      retainedBytes: bytes,
      ...(oldest !== undefined ? { oldestRetainedAt: oldest } : {}),
      ...(this.retry ? { nextRetryAt: this.retry.nextAt, retryingSince: this.retry.since } : {}),
      intakePaused: this.paused,
      ...(this.intake ? { chargedBytes: this.intake.chargedBytes } : {}),
      remoteTip: this.remoteTip,
      pendingWrites: this.pending.length,
      openWindows: this.windows.size,
      frozenWrites: [...this.frozen.values()].reduce((n, w) => n + w.length, 0),
      lastCause: this.retry?.lastCause,
    };
  }

  // ------------------------------------------------------------------------------------------
  // The loop

  private async run(): Promise<void> {
    const pollMs = this.o.pollMs ?? 1000;
    while (!this.stopped) {
      this.wakeCtl = new AbortController();
      try {
        await this.step();
      } catch (err) {
        if (err instanceof LostLeaseError) {
          this.log.warn({ err: err.message }, "lost the branch; stopping before the next push");
          this.stopped = true;
          break;
        }
        this.log.error({ err }, "branch worker step failed");
        await this.clock.sleep(pollMs, this.wakeCtl.signal);
        continue;
      }
      if (this.stopped) break;
      if (this.flushes.length > 0) continue;
      const now = this.clock.now();
      const next = nextStepAt({
        now,
        pollMs,
        idlePollMs: this.o.idlePollMs ?? pollMs,
        windowDeadline: nextWindowDeadline(this.windows),
        pendingWrites: this.pending.length,
        nextFetchAt: this.nextFetchAt,
        retryAt: this.retry?.nextAt,
        intakePaused: this.paused,
        autoPublish: this.autoPublishing(),
        lastPushAt: this.lastPushAt,
        pushCooldownMs: this.o.pushCooldownMs ?? 0,
      });
      if (next > now) await this.clock.sleep(next - now, this.wakeCtl.signal);
    }
  }

  private autoPublishing(): boolean {
    return this.o.autoPublish !== false;
  }

  private async step(): Promise<void> {
    await this.drainInbox();
    const now = this.clock.now();
    await this.applyVerdicts(now);
    this.settleSavedEntries();
    const retryDue = !this.retry || now >= this.retry.nextAt;
    const flushes = this.flushes.splice(0);
    if (flushes.length > 0) {
      const marks = flushes.map((f) => f.mark);
      const mark = marks.includes(undefined)
        ? undefined
        : (marks as string[]).sort(compareEntryIds)[marks.length - 1];
      // Every write up to it is closed into this publication: all read, or those up to the mark.
      const read = this.lastEntryId === "0" ? "0-0" : this.lastEntryId;
      const inboxMark = mark !== undefined && compareEntryIds(mark, read) < 0 ? mark : read;
      this.closeWindows(now, mark ?? "all");
      await this.announceDecided();
      // One retry clock: while a failed publication waits for its retry, a flush spends no push.
      const result: PublishResult =
        this.retry && !retryDue
          ? {
              ok: false,
              cause: `publication waits for its retry at ${new Date(this.retry.nextAt).toISOString()}`,
            }
          : await this.publish(true);
      for (const f of flushes) f.resolve(result.ok ? { ...result, inboxMark } : result);
    } else {
      this.closeWindows(now);
      await this.announceDecided();
      const wantObserve =
        !this.baselined ||
        this.observeAsked !== undefined ||
        (now >= this.nextFetchAt && this.pending.length === 0);
      if (wantObserve && retryDue) {
        const reason = !this.baselined ? "baseline" : (this.observeAsked ?? "periodic");
        this.observeAsked = undefined;
        try {
          await this.observe(reason);
        } catch (err) {
          this.failed(err, "observe");
        }
      }
      const cooled = now >= this.lastPushAt + (this.o.pushCooldownMs ?? 0);
      // An observation that just failed was this retry's attempt: the push waits for the next one.
      const stillDue = !this.retry || now >= this.retry.nextAt;
      if (this.pending.length > 0 && this.autoPublishing() && (this.retry ? stillDue : cooled)) {
        await this.publish(false);
      }
    }
    await this.updateIntake();
    // A mark settled now gives its marker's entry to the settle just after it.
    await this.settleSnapshotMarks();
    await this.settleDoneEntries();
    this.reportStatus();
  }

  /** Initial-snapshot markers with nothing before them held any more: their GitTarget's snapshots are in Git. */
  private async settleSnapshotMarks(): Promise<void> {
    if (this.snapshotMarks.length === 0) return;
    const held = [...this.held.values()];
    const waiting: typeof this.snapshotMarks = [];
    for (const m of this.snapshotMarks) {
      const before = held.some(
        (h) =>
          h.write.target.namespace === m.target.namespace &&
          h.write.target.name === m.target.name &&
          compareEntryIds(h.entryId, m.entryId) < 0,
      );
      if (before) {
        waiting.push(m);
        continue;
      }
      this.log.info(
        { target: `${m.target.namespace}/${m.target.name}`, token: m.token },
        "the watch plane's initial snapshots are published",
      );
      const record = this.o.hooks?.onInitialSnapshotsPublished;
      this.handOn(m.entryId, m.charge, !!record);
      await record?.({ target: m.target, token: m.token, entryId: m.entryId });
    }
    this.snapshotMarks = waiting;
  }

  /** An entry handed to a hook: it waits for `saved` when the hooks save entries, else it leaves now. */
  private handOn(entryId: string, charge: number, handed: boolean): void {
    if (handed && this.o.hooks?.savesEntries === true) this.awaitingSave.set(entryId, charge);
    else this.doneEntries.push({ entryId, charge });
  }

  /** The state after an entry handed on is saved (`savesEntries`): the entry may leave the inbox. */
  saved(entryId: string): void {
    this.savedEntries.push(entryId);
    this.wake();
  }

  /** Settles the entries handed on whose state was saved since the last step. */
  private settleSavedEntries(): void {
    for (const entryId of this.savedEntries.splice(0)) {
      const charge = this.awaitingSave.get(entryId);
      if (charge === undefined) continue;
      this.awaitingSave.delete(entryId);
      this.doneEntries.push({ entryId, charge });
    }
  }

  // ------------------------------------------------------------------------------------------
  // Inbox

  private async drainInbox(): Promise<void> {
    for (;;) {
      const entries = await this.inbox.read(this.lastEntryId);
      if (entries.length === 0) return;
      const parsedWrites = entries.map((e) =>
        e.kind === "write" ? safeJson(e.data, AcceptedWrite) : undefined,
      );
      // A snapshot's write is judged against the tip it was read at (`tipWhenRead`): read the
      // remote first, before the batch counts as read. Read before the first observation, it had
      // no tip, was written whole, and undid pushes that landed while it waited (soak --mirror
      // seed 71015: a worker restarted just after a mirror restart).
      if (!this.baselined && parsedWrites.some((w) => w?.snapshot)) await this.observe("baseline");
      this.lastEntryId = (entries[entries.length - 1] as InboxEntry).entryId;
      const writes: HeldWrite[] = [];
      for (const [i, e] of entries.entries()) {
        if (e.kind === "write") {
          const parsed = parsedWrites[i];
          if (!parsed) {
            this.log.warn({ entry: e.entryId }, "dropping an inbox write that does not parse");
            this.doneEntries.push({ entryId: e.entryId, charge: e.charge ?? 0 });
            continue;
          }
          // The charge the gate made (an entry from before the gate charged is charged alike).
          const charge = e.charge ?? writeCharge(Buffer.byteLength(e.data));
          writes.push({
            write: parsed,
            entryId: e.entryId,
            charge,
            ...(this.remoteTip ? { tipWhenRead: this.remoteTip } : {}),
          });
        } else {
          await this.handleNotice(e);
        }
      }
      const already = await this.inbox.alreadyPublished(writes.map((w) => w.write.id));
      const now = this.clock.now();
      for (const h of writes) {
        // A write published already, or a second copy of one held (a client's retry): its entry
        // leaves at once, with its charge; the held copy is kept until its push lands.
        if (already.has(h.write.id) || this.held.has(h.write.id)) {
          this.doneEntries.push({ entryId: h.entryId, charge: h.charge });
          continue;
        }
        // The watch plane's markers: a round of a GitTarget's initial snapshots starts, or is all before it.
        const mark = h.write.initialSnapshots;
        if (mark !== undefined) {
          const t = h.write.target;
          const target = { namespace: t.namespace, name: t.name, ...(t.uid ? { uid: t.uid } : {}) };
          if (mark.phase === "started") {
            this.doneEntries.push({ entryId: h.entryId, charge: h.charge });
            await this.o.hooks?.onInitialSnapshotsStarted?.({ target, token: mark.token });
          }
          // Its entry is settled once the mark is (see `snapshotMarks`).
          else this.snapshotMarks.push({ target, token: mark.token, entryId: h.entryId, charge: h.charge });
          continue;
        }
        // A snapshot's prune sweep becomes the delete changes it makes on the tip, then is
        // judged like any write; one that finds nothing to delete leaves without a commit.
        if (h.write.sweep) {
          h.write.changes = await this.sweepChanges(h.write);
          if (h.write.changes.length === 0) {
            this.doneEntries.push({ entryId: h.entryId, charge: h.charge });
            continue;
          }
        }
        const refusal = await this.admission(h.write);
        if (refusal) {
          await this.refuse(h, refusal);
          continue;
        }
        this.held.set(h.write.id, h);
        const stale = this.o.hooks?.onSnapshotWrite;
        if (h.write.snapshot && !h.write.snapshot.initial && stale) {
          this.judging.set(h.write.id, { ...h, stage: "snapshot" });
          await stale(h.write);
          continue;
        }
        if (await this.judgeApplierWrite(h)) continue;
        this.addWrite(h, now);
      }
      if (entries.length < 2000) return;
    }
  }

  /** The delete changes of a sweep on the remote tip: files of objects gone live the rule selects. */
  private async sweepChanges(write: AcceptedWrite): Promise<WriteChange[]> {
    const sweep = write.sweep as SnapshotSweep;
    // The sweep needs the folder as Git holds it: read the remote first if nothing was read yet.
    if (!this.baselined) await this.observe("baseline");
    const tip = this.remoteTip;
    if (!tip) return [];
    // Only a file Git held at the commit last applied is swept: one added since (a foreign push,
    // a publication not applied yet) was never live, and deleting it would lose its object.
    const applied = sweep.appliedCommit;
    if (!applied || !(await this.o.repo.hasObject(applied))) {
      this.log.debug(
        { write: write.id, kind: sweep.kind, commit: applied },
        "snapshot sweep: the applied commit is unknown or not in the clone; nothing deleted",
      );
      return [];
    }
    const changes: WriteChange[] = [];
    for (const { dir, namespace } of sweptDirs(write.path, sweep)) {
      const wasApplied = new Set(await this.o.repo.listFiles(applied, dir));
      const files: SweptFile[] = [];
      for (const name of await this.o.repo.listFiles(tip, dir)) {
        if (!wasApplied.has(name)) continue;
        const content = await this.o.repo.readFile(tip, `${dir}/${name}`);
        if (content) files.push({ name, content: content.toString("utf8") });
      }
      for (const ref of sweepDeletes(sweep, namespace, files)) changes.push({ op: "delete", ref });
    }
    if (changes.length > 0)
      this.log.info(
        { write: write.id, kind: sweep.kind, deletes: changes.length },
        "snapshot sweep: files of objects gone live to delete",
      );
    return changes.slice(0, 1000);
  }

  /** Hands a watched applier write to the apply window's judge; true when it is held for it. */
  private async judgeApplierWrite(h: HeldWrite): Promise<boolean> {
    const judge = this.o.hooks?.onWatchedApplierWrite;
    if (!h.write.applierAuthored || !judge) return false;
    this.judging.set(h.write.id, { ...h, stage: "applier" });
    await judge(h.write);
    return true;
  }

  /** Carries out the judgements of held writes that arrived since the last step. */
  private async applyVerdicts(now: number): Promise<void> {
    for (const v of this.verdicts.splice(0)) {
      const j = this.judging.get(v.writeId);
      if (!j) continue;
      this.judging.delete(v.writeId);
      const { stage, ...h } = j;
      if (v.mirror) {
        // A snapshot's write used: an applier's write still goes to the apply window's judge.
        if (stage === "snapshot" && (await this.judgeApplierWrite(h))) continue;
        this.addWrite(h, now);
        continue;
      }
      this.held.delete(v.writeId);
      // It leaves the inbox with its charge: a later snapshot brings what it held.
      this.doneEntries.push({ entryId: h.entryId, charge: h.charge });
      this.log.debug(
        { write: v.writeId, snapshot: h.write.snapshot?.id },
        stage === "snapshot"
          ? "a snapshot write collected while Git was ahead: discarded"
          : "the applier's own write: settled without a commit",
      );
    }
  }

  /**
   * Why the worker will not hold a write, or undefined: every write passes the same storability
   * and scope checks as at the door, whoever put it in the inbox. A refusal first rereads the spec (at most once a
   * second), so a grant made since the worker started is not missed.
   */
  private async admission(write: AcceptedWrite): Promise<Refusal | undefined> {
    const problem = writeProblem(write.changes);
    if (problem) return { reason: StatusReason.Unstorable, message: `${problem.field}: ${problem.message}` };
    const verdict = (): Refusal | undefined => {
      const t = write.target;
      const target = this.targets.find((x) => x.namespace === t.namespace && x.name === t.name);
      const refused = this.refusedSpecs.find((x) => x.namespace === t.namespace && x.name === t.name);
      if (!target && refused) return { reason: refused.reason, message: refused.message };
      if (!target)
        return {
          reason: StatusReason.UnknownTarget,
          message: `GitTarget ${t.namespace}/${t.name} does not write this branch`,
        };
      const v = checkChanges(target.scope, write.changes);
      return v.ok ? undefined : { reason: v.reason, message: v.message };
    };
    return this.judgedAfresh(verdict);
  }

  /** A refusing verdict is judged again after reading the spec anew (at most once a second). */
  private async judgedAfresh<T>(verdict: () => T | undefined): Promise<T | undefined> {
    const first = verdict();
    if (!first || !this.o.refreshSpec || this.clock.now() < this.specReadAt + SPEC_REFRESH_GAP_MS)
      return first;
    this.specReadAt = this.clock.now();
    try {
      const fresh = await this.o.refreshSpec();
      if (fresh)
        this.updateTargets(fresh.targets, {
          refused: fresh.refused,
          baseBranch: fresh.baseBranch,
          remote: fresh.remote,
        });
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, "could not read the branch's GitTargets again");
    }
    return verdict();
  }

  /**
   * A refusal notice names an object its GitTarget may hold, as a write must (the door checks it
   * too): one naming any other object, or a GitTarget that does not write here, is dropped.
   */
  private async noticeInScope(n: RefusalNotice): Promise<boolean> {
    const why = await this.judgedAfresh(() => {
      const t = this.targets.find((x) => x.namespace === n.target.namespace && x.name === n.target.name);
      if (!t) return `GitTarget ${n.target.namespace}/${n.target.name} does not write this branch`;
      const problem = objectRefProblem(n.object, "object");
      if (problem) return `${problem.field}: ${problem.message}`;
      const v = checkScope(t.scope, n.object);
      return v.ok ? undefined : v.message;
    });
    if (why === undefined) return true;
    this.log.warn(
      { notice: n.id, target: `${n.target.namespace}/${n.target.name}`, why },
      "refusal notice dropped",
    );
    return false;
  }

  private async handleNotice(e: InboxEntry): Promise<void> {
    const hooks = this.o.hooks ?? {};
    if (e.kind === "push") {
      const n = safeJson(e.data, PushNotice);
      if (n) {
        this.observeAsked = "notice";
        // The commit it names is downloaded beside the read of the tip (a hint, never trusted).
        this.noticeHint = n.deleted ? undefined : n.after;
      }
    } else if (e.kind === "refusal") {
      const parsed = safeJson(e.data, RefusalNotice);
      const n = parsed && (await this.noticeInScope(parsed)) ? parsed : undefined;
      this.handOn(e.entryId, 0, !!(n && hooks.onRefusal));
      if (n) await hooks.onRefusal?.(n, e.entryId);
      return;
    } else if (e.kind === "report") {
      const r = safeJson(e.data, Report);
      if (r) await hooks.onReport?.(r);
    }
    this.doneEntries.push({ entryId: e.entryId, charge: 0 });
  }

  private addWrite(h: HeldWrite, now: number): void {
    const t = h.write.target;
    const target = `${t.namespace}/${t.name}`;
    if (this.isSuspended(target)) {
      const frozen = this.frozen.get(target) ?? [];
      frozen.push(h);
      this.frozen.set(target, frozen);
      return;
    }
    const open = this.windows.get(target);
    const author = `${h.write.author.name} <${h.write.author.email}>`;
    // A window belongs to one author: another author's write is a commit boundary.
    if (open && authorOf(open.writes[0] as HeldWrite) !== author) this.closeWindow(open, now);
    const spec = this.targets.find((x) => x.namespace === t.namespace && x.name === t.name);
    const saved = addToWindow(
      this.windows,
      target,
      h,
      now,
      spec?.window ?? DEFAULT_WINDOW,
      h.write.save === true,
    );
    if (saved) this.closeWindow(saved, now);
  }

  private closeWindows(now: number, mark?: string | "all"): void {
    const all = mark !== undefined;
    for (const w of dueWindows(this.windows, now, all)) {
      if (mark && mark !== "all" && !w.writes.some((h) => compareEntryIds(h.entryId, mark) <= 0)) continue;
      this.closeWindow(w, now);
    }
  }

  private closeWindow(w: OpenWindow<HeldWrite>, now: number): void {
    this.windows.delete(w.target);
    const last = w.writes.at(-1) as HeldWrite;
    const p = { seq: ++this.seq, target: w.target, writes: w.writes, closedAt: now, entryId: last.entryId };
    this.pending.push(p);
    if (this.o.hooks?.onWriteDecided) this.decided.push(p);
  }

  /** Tells the hook about windows closed since the last call, before anything publishes them. */
  private async announceDecided(): Promise<void> {
    const hook = this.o.hooks?.onWriteDecided;
    if (!hook) return;
    for (const p of this.decided.splice(0)) {
      const last = p.writes.at(-1) as HeldWrite;
      const created: ObjectRef[] = [];
      const edited: WriteDecided["editedObjects"] = [];
      for (const h of p.writes) {
        const editedAt = h.write.editedAt ?? h.write.acceptedAt;
        for (const c of h.write.changes) {
          const ref =
            c.op === "upsert" ? (refOf(c.object as Parameters<typeof refOf>[0]) as ObjectRef) : c.ref;
          edited.push({ ref, editedAt, acceptedAt: h.write.acceptedAt });
          if (c.op !== "upsert") continue;
          let known: Buffer | undefined;
          try {
            if (this.remoteTip)
              known = await this.o.repo.readFile(this.remoteTip, objectPath(h.write.path, ref));
          } catch {
            continue; // a path the layout refuses is refused at commit time, not created
          }
          if (!known) created.push(ref);
        }
      }
      await hook({
        entryId: p.entryId ?? last.entryId,
        target: last.write.target,
        createdObjects: created,
        editedObjects: edited,
      });
    }
  }

  // ------------------------------------------------------------------------------------------
  // Observation

  /**
   * Reads the remote and classifies its tip. Every piece of news about the remote passes here.
   * A moved tip invalidates the checkout, and writes whose trailers the new history carries are
   * settled as published (a push of ours, or of a previous owner, that landed).
   */
  private async observe(reason: FetchReason): Promise<Observation> {
    const previous = this.remoteTip;
    const haves = [previous, this.built.commits.at(-1)?.commit].filter((x): x is string => !!x);
    this.metrics.fetch(this.key, reason);
    this.log.debug({ reason, haves }, "reading the remote tip");
    const release =
      reason === "baseline" && this.o.baselineSlots
        ? await this.o.baselineSlots.acquire(this.stopCtl.signal)
        : undefined;
    let read: Awaited<ReturnType<BareRepo["fetchBranch"]>>;
    try {
      const hint = this.noticeHint;
      this.noticeHint = undefined;
      read = await this.o.repo.fetchBranch(this.remote(), this.o.spec.branch, haves, hint);
    } finally {
      release?.();
    }
    const { tip, downloaded } = read;
    this.log.debug({ reason, commit: tip, downloaded }, "read the remote tip");
    const baseline = !this.baselined;
    this.baselined = true;
    this.nextFetchAt = this.clock.now() + (this.o.fetchIntervalMs ?? 60_000);
    const pushedByUs = tip !== undefined && this.pushedByUs.has(tip);
    if (tip !== previous || baseline) {
      this.remoteTip = tip;
      if (tip) await this.o.repo.writeRef(`refs/heads/${this.o.spec.branch}`, tip);
      // Recorded before the inbox lets go of the writes it carries (see `landed`).
      await recordTip(this.o.redis, this.o.prefix, this.key, this.token(), tip);
      await this.settleLanded(tip, previous);
    }
    const o: Observation = {
      tip,
      previous,
      pushedByUs,
      baseline,
      reason,
      folders: await this.foldersAt(tip),
    };
    if (tip !== previous || baseline)
      this.log.info({ commit: tip, previous, reason, pushedByUs, baseline }, "observed the remote tip");
    await this.o.hooks?.onObserved?.(o);
    return o;
  }

  /** Walks the history between `tip` and `previous` for trailers of writes we still hold. */
  private async settleLanded(tip: string | undefined, previous: string | undefined): Promise<void> {
    if (!tip || this.held.size === 0) return;
    let oldest = Number.POSITIVE_INFINITY;
    for (const h of this.held.values()) oldest = Math.min(oldest, Date.parse(h.write.acceptedAt) || 0);
    // A commit carrying a write is younger than the write; allow for clock skew between hosts.
    const cutoff = Math.floor((oldest - 15 * 60_000) / 1000);
    const landed = new Map<string, string>();
    const seen = new Set<string>();
    const queue = [tip];
    while (queue.length > 0 && seen.size < 2000) {
      const oid = queue.shift() as string;
      if (seen.has(oid) || oid === previous) continue;
      seen.add(oid);
      let c: Awaited<ReturnType<BareRepo["readCommit"]>>;
      try {
        c = await this.o.repo.readCommit(oid);
      } catch {
        continue;
      }
      for (const id of trailersOf(c.message)) if (this.held.has(id) && !landed.has(id)) landed.set(id, oid);
      if (c.timestamp < cutoff) continue;
      queue.push(...c.parents);
    }
    if (landed.size === 0) return;
    const settled = [...landed].map(([id, commit]) => ({ id, commit, held: this.held.get(id) as HeldWrite }));
    await this.inbox.settle(
      this.token(),
      settled.map(({ id, commit }) => ({ id, commit })),
      settled.map((s) => ({ entryId: s.held.entryId, charge: s.held.charge })),
    );
    this.forget(new Set(landed.keys()));
    this.log.info({ writes: landed.size, commit: tip }, "writes found already published");
  }

  // ------------------------------------------------------------------------------------------
  // Materialize and publish

  /**
   * Makes the checkout the remote tip plus one commit per pending write, reusing the commits
   * already built on this tip. The one routine that writes commits; a replay is this routine
   * after the tip moved.
   */
  private async materialize(): Promise<string | undefined> {
    const onto = this.remoteTip ?? this.startFrom;
    if (this.built.base !== onto) {
      const replayed = this.built.commits.length;
      if (replayed > 0) this.metrics.replay(this.key, replayed);
      this.built = { base: onto, commits: [] };
    }
    let parent = this.built.commits.at(-1)?.carriedBy ?? this.built.base;
    for (const p of this.pending.slice(this.built.commits.length)) {
      let written: Awaited<ReturnType<BareRepo["commitChanges"]>>;
      for (;;) {
        const { changes, refused } = await this.changesOf(parent, p);
        for (const r of refused)
          await this.refuse(r.held, { reason: StatusReason.Unstorable, message: r.reason });
        this.log.debug({ seq: p.seq, changes: changes.length, parent }, "committing a pending write");
        try {
          written = await this.o.repo.commitChanges(parent, changes, this.commitSpec(p));
          break;
        } catch (err) {
          // A commit that fails for a reason retrying cannot heal would block the branch for
          // good: the writes that fail are settled as refused and the rest committed.
          if (!cannotHeal(err)) throw err;
          const message = `commit failed: ${(err as Error).message}`;
          const culprits = await this.failingAlone(parent, p);
          const blamed = culprits.length > 0 ? culprits : p.writes.filter((h) => this.held.has(h.write.id));
          if (blamed.length === 0) throw err;
          for (const h of blamed) await this.refuse(h, { reason: StatusReason.CommitFailed, message });
        }
      }
      this.log.debug({ seq: p.seq, commit: written?.commit }, "committed a pending write");
      if (written) {
        this.metrics.commit(this.key);
        parent = written.commit;
      }
      this.built.commits.push({
        pending: p,
        commit: written?.commit,
        carriedBy: parent,
        newOids: written?.newOids ?? [],
      });
    }
    return parent;
  }

  /** The held writes of a pending write whose own changes cannot be committed on `parent`. */
  private async failingAlone(parent: string | undefined, p: PendingWrite): Promise<HeldWrite[]> {
    const failing: HeldWrite[] = [];
    for (const h of p.writes) {
      if (!this.held.has(h.write.id)) continue;
      const { changes } = await this.changesOf(parent, { ...p, writes: [h] });
      try {
        await this.o.repo.commitChanges(parent, changes, this.commitSpec({ ...p, writes: [h] }));
      } catch (err) {
        if (cannotHeal(err)) failing.push(h);
      }
    }
    return failing;
  }

  /**
   * The file changes of a pending write's held writes on `parent`, in order. An upsert with a base
   * stores only its change, carried over the object as this commit has it so far (an earlier
   * write's result, else the file at `parent`): a field the writer did not change keeps Git's
   * value. Without a base, or with no object in Git to merge onto, the object is stored whole.
   */
  private async changesOf(
    parent: string | undefined,
    p: PendingWrite,
  ): Promise<{
    changes: FileChange[];
    refused: Array<{ held: HeldWrite; reason: string }>;
  }> {
    const changes: FileChange[] = [];
    const refused: Array<{ held: HeldWrite; reason: string }> = [];
    const sofar = new Map<string, string | null>();
    const fileAt = async (path: string, mine: FileChange[]): Promise<string | null | undefined> => {
      const own = mine.findLast((c) => c.path === path);
      if (own) return own.content === null ? null : String(own.content);
      if (sofar.has(path)) return sofar.get(path);
      if (!parent) return undefined;
      return (await this.o.repo.readFile(parent, path))?.toString("utf8");
    };
    for (const h of p.writes) {
      if (!this.held.has(h.write.id)) continue;
      const mine: FileChange[] = [];
      let problem: string | undefined;
      for (const c of h.write.changes) {
        // The layout's and the serializer's refusals settle the write as refused; a failed read
        // of Git is thrown, for the publication to be tried again.
        const stored = (f: () => FileChange) => {
          try {
            mine.push(f());
          } catch (err) {
            problem ??= (err as Error).message;
          }
        };
        if (c.op === "delete") {
          stored(() => ({ path: objectPath(h.write.path, c.ref), content: null }));
          continue;
        }
        const obj = c.object as unknown as Parameters<typeof refOf>[0] & Record<string, unknown>;
        let path: string;
        try {
          path = objectPath(h.write.path, refOf(obj));
        } catch (err) {
          problem ??= (err as Error).message;
          continue;
        }
        const named = c.base as Record<string, unknown> | undefined;
        const bases = named ? [named] : await this.snapshotBases(h, path);
        const current = bases.length > 0 ? storedObject(await fileAt(path, mine)) : undefined;
        stored(() => ({
          path,
          content: objectYaml(
            current ? mergedObject(cleanObject(obj), bases.map(cleanObject), current) : obj,
          ),
        }));
      }
      if (problem !== undefined) {
        refused.push({ held: h, reason: problem });
        continue;
      }
      changes.push(...mine);
      for (const c of mine) sofar.set(c.path, c.content === null ? null : String(c.content));
    }
    return { changes, refused };
  }

  /**
   * The bases of a snapshot's object that names none. Its file at the tip the worker held when it
   * read the write: the snapshot saw the cluster as of that tip, so only what differs from it is a
   * change, and an object equal to it changes nothing, whatever Git took meanwhile. And, for each
   * commit the stamp says the cluster may still run (the applier's last applied commit, an
   * operation's commit), its file there when a foreign commit since then changed the file: that
   * push may not be on the cluster yet, so a field still at its value there is the applier's, not
   * an edit. Our own publications since then need no such base: they carry what the cluster
   * already held, so an edit back to an older value is an edit. None for other writes, or when no
   * base holds a file (an object new to Git is written whole); a commit the clone lacks is passed
   * over.
   */
  private async snapshotBases(h: HeldWrite, path: string): Promise<Array<Record<string, unknown>>> {
    const tip = h.tipWhenRead;
    if (!h.write.snapshot || !tip) return [];
    const bases: Array<Record<string, unknown>> = [];
    const tipFile = storedObject((await this.o.repo.readFile(tip, path))?.toString("utf8"));
    if (tipFile) bases.push(tipFile);
    for (const commit of new Set(h.write.snapshot.appliedCommits ?? [])) {
      if (commit === tip || !(await this.o.repo.hasObject(commit))) continue;
      if (!(await this.foreignChangeSince(commit, tip, path))) continue;
      const base = storedObject((await this.o.repo.readFile(commit, path))?.toString("utf8"));
      if (base) bases.push(base);
    }
    return bases;
  }

  /**
   * Did a foreign commit (one carrying no write of ours) between `from` and `to` change `path`?
   * The commits are walked back from `to` and kept per pair (commits never change); a history
   * that does not reach `from` within the bound counts as a change (the safe side: the older file
   * is a base too).
   */
  private async foreignChangeSince(from: string, to: string, path: string): Promise<boolean> {
    const foreign = await this.foreignCommits(from, to);
    if (foreign === null) return true;
    for (const { oid, parent } of foreign) {
      const now = await this.o.repo.readFile(oid, path);
      const before = parent ? await this.o.repo.readFile(parent, path) : undefined;
      if (now === undefined ? before !== undefined : before === undefined || !now.equals(before)) return true;
    }
    return false;
  }

  private readonly foreignRanges = new Map<string, Array<{ oid: string; parent?: string }> | null>();

  private async foreignCommits(
    from: string,
    to: string,
  ): Promise<Array<{ oid: string; parent?: string }> | null> {
    const key = `${from}..${to}`;
    const known = this.foreignRanges.get(key);
    if (known !== undefined) return known;
    const foreign: Array<{ oid: string; parent?: string }> = [];
    const seen = new Set<string>();
    const queue = [to];
    let reached = false;
    while (queue.length > 0 && seen.size < FOREIGN_WALK_BOUND) {
      const oid = queue.shift() as string;
      if (seen.has(oid)) continue;
      if (oid === from) {
        reached = true;
        continue;
      }
      seen.add(oid);
      let c: Awaited<ReturnType<BareRepo["readCommit"]>>;
      try {
        c = await this.o.repo.readCommit(oid);
      } catch {
        break; // a commit the clone lacks: the range is not known
      }
      if (trailersOf(c.message).length === 0)
        foreign.push({ oid, ...(c.parents[0] ? { parent: c.parents[0] } : {}) });
      queue.push(...c.parents);
    }
    const out = reached && queue.length === 0 ? foreign : null;
    if (this.foreignRanges.size >= 64) this.foreignRanges.clear();
    this.foreignRanges.set(key, out);
    return out;
  }

  private commitSpec(p: PendingWrite) {
    const writes = p.writes.filter((h) => this.held.has(h.write.id));
    const first = (writes[0] ?? p.writes[0]) as HeldWrite;
    const messages = [...new Set(writes.map((h) => h.write.message).filter((m): m is string => !!m))];
    const subject =
      messages.length > 0
        ? messages.join("\n\n")
        : `Update ${p.target} (${writes.length} write${writes.length === 1 ? "" : "s"})`;
    const trailers = writes.map((h) => `${WRITE_TRAILER}: ${h.write.id}`).join("\n");
    const ts = Math.floor(this.clock.now() / 1000);
    const edited = Date.parse(first.write.editedAt ?? first.write.acceptedAt);
    return {
      message: `${subject}\n\n${trailers}\n`,
      author: { ...first.write.author, timestamp: Number.isNaN(edited) ? ts : Math.floor(edited / 1000) },
      committer: {
        ...(this.o.committer ?? { name: "applygate", email: "applygate@localhost" }),
        timestamp: ts,
      },
    };
  }

  /**
   * One push cycle: materialize, push with compare-and-swap, and on a rejection fetch, replay and
   * push again with jittered backoff, within one deadline checked throughout: before each step,
   * and by every Git call, which is abandoned when the deadline passes. A failure (a stalled call
   * included) keeps every pending write and schedules the next attempt.
   */
  private async publish(flush: boolean): Promise<PublishResult> {
    const timeoutMs = this.o.pushCycleTimeoutMs ?? DEFAULT_PUSH_CYCLE_TIMEOUT_MS;
    const deadline = this.clock.now() + timeoutMs;
    const passed = () => new PublicationDeadlineError(timeoutMs);
    // One signal for the cycle's Git calls: aborted at the deadline, or when the worker stops.
    const cycle = new AbortController();
    const timer = setTimeout(() => cycle.abort(passed()), timeoutMs);
    const onStop = () => cycle.abort(this.stopCtl.signal.reason);
    this.stopCtl.signal.addEventListener("abort", onStop, { once: true });
    this.cycleSignal = cycle.signal;
    const inTime = () => {
      if (cycle.signal.aborted) throw cycle.signal.reason;
      if (this.clock.now() >= deadline) throw passed();
    };
    const maxRetries = this.o.maxContentionRetries ?? 10;
    try {
      if (!this.baselined) await this.observe("baseline");
      for (let attempt = 0; ; attempt++) {
        inTime();
        // A branch that does not exist yet starts from its base, never as a commit of one folder.
        this.startFrom =
          this.remoteTip === undefined && this.pending.length > 0 ? await this.baseOfNewBranch() : undefined;
        const head = await this.materialize();
        if (head === this.remoteTip) {
          await this.landed(head);
          return { ok: true, tip: head, folders: await this.foldersAt(head) };
        }
        if (!(await this.o.lease.holds())) throw new LostLeaseError(`lost the lease of ${this.key}`);
        inTime();
        const oids = this.built.commits.flatMap((c) => c.newOids);
        this.log.debug({ attempt, commit: head, base: this.remoteTip, objects: oids.length }, "pushing");
        try {
          await this.o.repo.push(this.remote(), this.o.spec.branch, this.remoteTip, head as string, oids);
          this.metrics.push(this.key, "landed");
          await this.landed(head);
          return { ok: true, tip: head, folders: await this.foldersAt(head) };
        } catch (err) {
          if (err instanceof PushRejectedError) {
            this.metrics.push(this.key, "rejected");
            this.log.info(
              { attempt, reason: err.reason },
              "push rejected: the branch moved; fetching and replaying",
            );
            if (attempt >= maxRetries || this.clock.now() >= deadline)
              throw new Error(`push still rejected after ${attempt + 1} attempts: ${err.reason}`);
            inTime();
            await this.observe("rejected");
            this.metrics.contentionRetry(this.key);
            const backoff = contentionBackoff(attempt, this.o.random);
            await this.clock.sleep(Math.min(backoff, deadline - this.clock.now()), this.cycleSignal);
            continue;
          }
          if (!(err instanceof GitRemoteError)) throw err;
          // The push may have landed with only its reply lost: the remote decides, before any replay.
          this.metrics.fetch(this.key, "lostReply");
          const tip = await this.o.repo.remoteTip(this.remote(), this.o.spec.branch);
          if (tip === head) {
            this.metrics.push(this.key, "replyLost");
            this.log.info({ commit: head }, "push reply lost, but the remote holds our head: it landed");
            await this.landed(head);
            return { ok: true, tip: head, folders: await this.foldersAt(head) };
          }
          this.metrics.push(this.key, "failed");
          throw err;
        }
      }
    } catch (err) {
      if (err instanceof LostLeaseError) throw err;
      // The probe after a failed push fails too once the deadline passed: say why the cycle ended.
      const cause = cycle.signal.aborted && err instanceof GitRemoteError ? cycle.signal.reason : err;
      if (this.stopped) return { ok: false, cause: (cause as Error).message };
      return { ok: false, cause: this.failed(cause, flush ? "flush" : "publish") };
    } finally {
      clearTimeout(timer);
      this.stopCtl.signal.removeEventListener("abort", onStop);
      this.cycleSignal = undefined;
    }
  }

  /**
   * The commit a branch that does not exist yet is created on: the tip of the base branch its
   * GitTargets (or GitProvider) name, else of the repository's default branch. A named base that
   * does not exist fails the publication (writes stay pending, BaseBranchMissing); a repository
   * with no default branch (empty) gets a first commit.
   */
  private async baseOfNewBranch(): Promise<string | undefined> {
    const own = this.o.spec.branch;
    let base = this.baseBranch === own ? undefined : this.baseBranch;
    if (base === undefined) {
      const ad = await advertise(this.remote(), "git-upload-pack");
      const head = [...ad.capabilities].find((c) => c.startsWith("symref=HEAD:refs/heads/"));
      const name = head?.slice("symref=HEAD:refs/heads/".length);
      if (!name || name === own || !ad.refs.has(`refs/heads/${name}`)) return undefined;
      base = name;
    }
    const { tip } = await this.o.repo.fetchBranch(
      this.remote(),
      base,
      this.startFrom ? [this.startFrom] : [],
    );
    if (!tip) throw new BaseBranchMissingError(base, own);
    if (tip !== this.startFrom)
      this.log.info({ base, commit: tip }, "the branch does not exist yet: starting it from its base");
    return tip;
  }

  private failed(err: unknown, during: string): string {
    const cause = err instanceof Error ? err.message : String(err);
    this.retry = afterFailure(this.retry, this.clock.now(), cause);
    this.retryReason = err instanceof BaseBranchMissingError ? StatusReason.BaseBranchMissing : undefined;
    this.log.warn(
      { during, cause, nextRetryAt: new Date(this.retry.nextAt).toISOString() },
      "publication failed; retrying later",
    );
    return cause;
  }

  /** A push carrying every built commit landed (or nothing needed pushing): forget those writes. */
  private async landed(head: string | undefined): Promise<void> {
    const published: Array<{ id: string; commit: string }> = [];
    const entries: SettledEntry[] = [];
    const ids = new Set<string>();
    for (const c of this.built.commits) {
      if (c.commit) this.pushedByUs.add(c.commit);
      for (const h of c.pending.writes) {
        if (!this.held.has(h.write.id)) continue;
        ids.add(h.write.id);
        entries.push({ entryId: h.entryId, charge: h.charge });
        const commit = c.commit ?? c.carriedBy;
        if (commit) published.push({ id: h.write.id, commit });
      }
    }
    const carried = this.built.commits.filter((c) => c.pending.writes.some((h) => ids.has(h.write.id)));
    if (head) this.pushedByUs.add(head);
    if (this.pushedByUs.size > 10_000)
      this.pushedByUs.delete(this.pushedByUs.values().next().value as string);
    const moved = head !== this.remoteTip;
    // The tip is recorded before the inbox lets go of the writes it carries: an executor's edit
    // recheck that no longer finds a write in the inbox then finds the tip moved.
    if (moved) await recordTip(this.o.redis, this.o.prefix, this.key, this.token(), head);
    await this.inbox.settle(
      this.token(),
      published,
      [...entries, ...this.doneEntries.splice(0)],
      this.refusedWrites.splice(0),
    );
    this.forget(ids);
    await this.clearRefusals(carried.flatMap((c) => c.pending.writes.map((h) => h.write.target)));
    const now = this.clock.now();
    if (head !== this.remoteTip || entries.length > 0) this.lastPublishedAt = now;
    if (head !== this.remoteTip) {
      this.lastPushAt = now;
      this.log.info({ commit: head, writes: ids.size }, "published");
    }
    this.remoteTip = head;
    // A flush with nothing to push lands the tip the clone's ref already names: no write.
    if (head && moved) await this.o.repo.writeRef(`refs/heads/${this.o.spec.branch}`, head);
    this.built = { base: head, commits: [] };
    if (head && (moved || carried.length > 0))
      await this.o.hooks?.onPublished?.({
        tip: head,
        folders: await this.foldersAt(head),
        entryIds: carried.map((c) => c.pending.entryId ?? (c.pending.writes.at(-1) as HeldWrite).entryId),
      });
    this.retry = undefined;
    this.retryReason = undefined;
    // The gate learns at once that no retry is pending (which releases its latch).
    if (this.paused || this.intake?.retrying) await this.updateIntake();
  }

  private forget(ids: Set<string>): void {
    for (const id of ids) this.held.delete(id);
    const keep = (h: HeldWrite) => this.held.has(h.write.id);
    this.pending = this.pending
      .map((p) => ({ ...p, writes: p.writes.filter(keep) }))
      .filter((p) => p.writes.length > 0);
    // The pending writes changed, so the checkout is rebuilt from the tip.
    this.built = { base: undefined, commits: [] };
    for (const w of [...this.windows.values()]) {
      w.writes = w.writes.filter(keep);
      if (w.writes.length === 0) this.windows.delete(w.target);
    }
  }

  /**
   * Settles a write as refused: it leaves the branch's queue (recorded with the next settle, so
   * `wait=published` answers at once), counts in a metric, sets WriteRefused on its GitTarget with
   * an Event, and reaches the decisions as a refusal notice, as a refused edit does. The branch
   * goes on.
   */
  private async refuse(h: HeldWrite, why: Refusal): Promise<void> {
    const t = h.write.target;
    const target = `${t.namespace}/${t.name}`;
    const first = h.write.changes[0];
    const ref = first ? (refOfChange(first) as ObjectRef) : undefined;
    const object = ref ? `${ref.kind} ${ref.namespace ? `${ref.namespace}/` : ""}${ref.name}` : undefined;
    this.log.warn(
      { write: h.write.id, target, reason: why.reason, message: why.message, object },
      "write refused: settled without a commit",
    );
    this.held.delete(h.write.id);
    this.doneEntries.push({ entryId: h.entryId, charge: h.charge });
    this.refusedWrites.push({ id: h.write.id, reason: `${why.reason}: ${why.message}` });
    this.metrics.refused(this.key, target, why.reason);
    this.refusedTargets.add(target);
    const refusal: WriteRefusal = {
      writeId: h.write.id,
      reason: why.reason,
      message: why.message,
      at: this.clock.now(),
      ...(object ? { object } : {}),
    };
    await this.o.status
      ?.refused?.({ namespace: t.namespace, name: t.name }, refusal)
      .catch((err: unknown) => {
        this.log.warn(
          { err: (err as Error).message, target },
          "could not record the refusal on the GitTarget",
        );
      });
    const hooks = this.o.hooks ?? {};
    if (ref && hooks.onRefusal) {
      const notice = RefusalNotice.safeParse({
        type: "refusal",
        id: `refusal-${h.write.id}`,
        target: t,
        branchKey: this.key,
        receivedAt: new Date(this.clock.now()).toISOString(),
        object: ref,
        reason: `${why.reason}: ${why.message}`.slice(0, 4000),
        author: h.write.author,
      });
      if (notice.success) await hooks.onRefusal(notice.data);
    }
    await hooks.onRefused?.(h.write, why.message);
  }

  /** A write of these GitTargets published: their WriteRefused goes back to False. */
  private async clearRefusals(targets: Array<{ namespace: string; name: string }>): Promise<void> {
    for (const t of targets) {
      const key = `${t.namespace}/${t.name}`;
      if (!this.refusedTargets.delete(key)) continue;
      await this.o.status?.refused?.({ namespace: t.namespace, name: t.name }, undefined).catch(() => {});
    }
  }

  // ------------------------------------------------------------------------------------------
  // Intake, status

  /**
   * Tells the intake gate the budget and whether a publication retry is pending, and reads back
   * its pause latch. The gate itself charges writes and latches the pause; a healthy branch that
   * told it so once has nothing more to say.
   */
  private async updateIntake(): Promise<void> {
    const budget = this.o.budgetBytes ?? DEFAULT_INTAKE_BUDGET_BYTES;
    const retrying = this.retry !== undefined;
    const told = this.intake;
    if (!retrying && !this.paused && told && !told.retrying && told.budget === budget) return;
    const retryAfter = this.retry ? (this.retry.nextAt - this.clock.now()) / 1000 : 0;
    const state = await this.inbox.syncIntake(this.token(), {
      pending: retrying,
      retryAfterSeconds: retryAfter,
      budgetBytes: budget,
      // The first word of a new owner: the count is rebuilt from the inbox it takes over.
      recount: told === undefined,
    });
    this.intake = { budget, retrying, chargedBytes: state.chargedBytes };
    if (state.paused && !this.paused)
      this.log.warn(
        { chargedBytes: state.chargedBytes, budgetBytes: budget },
        "intake paused: a write would pass the budget while publication retries",
      );
    if (!state.paused && this.paused) this.log.info("intake resumed");
    this.paused = state.paused;
  }

  private async settleDoneEntries(): Promise<void> {
    if (this.doneEntries.length === 0 && this.refusedWrites.length === 0) return;
    await this.inbox.settle(this.token(), [], this.doneEntries.splice(0), this.refusedWrites.splice(0));
  }

  private report(): PublicationReport {
    const s = this.snapshot();
    const r: PublicationReport = {
      branchKey: this.key,
      state: this.retry ? "Retrying" : "Published",
      intakePaused: this.paused,
      retainedWrites: s.retainedWrites,
      retainedBytes: s.retainedBytes,
    };
    if (this.remoteTip) r.commit = this.remoteTip;
    if (this.lastPublishedAt !== undefined) r.publishedAt = this.lastPublishedAt;
    if (this.retry) {
      if (this.retryReason) r.retryReason = this.retryReason;
      r.retryingSince = this.retry.since;
      r.lastError = this.retry.lastCause;
      r.nextRetryAt = this.retry.nextAt;
    }
    return r;
  }

  /**
   * Writes status only when the state, cause, pause or commit changed, not on every retry, and
   * to a GitTarget listed since the last write at once (it would otherwise wait for news). Written
   * beside the loop, one report at a time, each reading the state when it starts: a flush asked
   * meanwhile (an apply waiting on it) never waits for the API server.
   */
  private reportStatus(): void {
    if (!this.o.status || this.statusQueued) return;
    this.statusQueued = true;
    this.statusWriting = this.statusWriting.then(async () => {
      this.statusQueued = false;
      await this.writeStatus();
    });
  }

  private async writeStatus(): Promise<void> {
    if (!this.o.status) return;
    const r = this.report();
    const sig = JSON.stringify([r.state, r.commit, r.retryingSince, r.lastError, r.intakePaused]);
    const all = this.targets.map((t) => ({ namespace: t.namespace, name: t.name }));
    const changed = sig !== this.lastReport;
    const to = changed ? all : all.filter((t) => !this.reportedTo.has(`${t.namespace}/${t.name}`));
    if (to.length === 0) return;
    this.lastReport = sig;
    try {
      await this.o.status.report(to, r);
      if (changed) this.reportedTo.clear();
      for (const t of to) this.reportedTo.add(`${t.namespace}/${t.name}`);
    } catch (err) {
      this.lastReport = "";
      this.log.warn({ err: (err as Error).message }, "status write failed; will write again");
    }
  }

  private token(): string {
    const t = this.o.lease.token;
    if (!t) throw new LostLeaseError(`lost the lease of ${this.key}`);
    return t;
  }

  /** The remote, its calls bound to the cycle under way (or to the worker's life). */
  private remote() {
    return { ...this.remoteNow, signal: this.cycleSignal ?? this.stopCtl.signal };
  }
}

/** Default deadline of one publication cycle, replays and contention retries included. */
export const DEFAULT_PUSH_CYCLE_TIMEOUT_MS = 300_000;

/** A publication cycle that did not end within its deadline: a failure like any other. */
export class PublicationDeadlineError extends Error {
  override name = "PublicationDeadlineError";
  constructor(readonly timeoutMs: number) {
    super(`the publication cycle passed its deadline of ${timeoutMs} ms`);
  }
}

/** The base branch a missing branch is to be created from does not exist (yet). */
export class BaseBranchMissingError extends Error {
  constructor(
    readonly base: string,
    branch: string,
  ) {
    super(`base branch ${base} does not exist: ${branch} is created from it once it does`);
  }
}

/** Why a write is refused: a CamelCase rule and the words that explain it. */
interface Refusal {
  reason: string;
  message: string;
}

/**
 * Whether retrying cannot make a failed commit succeed: anything but a remote or network failure,
 * a lost lease, or a system error (a full disk heals).
 */
function cannotHeal(err: unknown): boolean {
  if (err instanceof GitRemoteError || err instanceof PushRejectedError || err instanceof LostLeaseError)
    return false;
  return typeof (err as { syscall?: unknown })?.syscall !== "string";
}

function authorOf(h: HeldWrite): string {
  return `${h.write.author.name} <${h.write.author.email}>`;
}

/** How many commits the walk for foreign commits since an applied commit reads at most. */
const FOREIGN_WALK_BOUND = 1000;

export function trailersOf(message: string): string[] {
  const out: string[] = [];
  const prefix = `${WRITE_TRAILER}: `;
  for (const line of message.split("\n"))
    if (line.startsWith(prefix)) out.push(line.slice(prefix.length).trim());
  return out;
}

function safeJson<T>(
  data: string,
  schema: { safeParse(v: unknown): { success: true; data: T } | { success: false } },
): T | undefined {
  try {
    const r = schema.safeParse(JSON.parse(data));
    return r.success ? r.data : undefined;
  } catch {
    return undefined;
  }
}

/** The object a file of the folder holds, as the merge reads it; undefined when it holds no object. */
function storedObject(text: string | null | undefined): Record<string, unknown> | undefined {
  if (!text) return undefined;
  try {
    const parsed: unknown = parseYaml(text);
    return isMap(parsed) ? parsed : undefined;
  } catch {
    return undefined; // not YAML (a person pushed something else): the object is stored whole
  }
}
