/**
 * What one branch worker knows and holds, as plain data: the writes between the inbox and a
 * landed push, the remote as last read, the publication's retry, and the services a step uses.
 * The branch worker's loop is its one owner; the modules beside it (reading the inbox, gathering
 * windows, commit content, publication, the entry ledger, status) are functions of this state,
 * called from that loop, so no two of them ever run at once.
 */
import type { Redis } from "ioredis";
import type { AcceptedWrite, ObjectRef, RefusalNotice, Report } from "../contract.js";
import type { BranchSpec, RefusedTarget, TargetSpec } from "../directory.js";
import type { BareRepo } from "../git/repo.js";
import type { Remote } from "../git/smart-http.js";
import type { Logger } from "../log.js";
import type { Slots } from "../slots.js";
import type { Clock } from "./clock.js";
import type { Inbox, SettledEntry } from "./inbox.js";
import type { BranchLease } from "./lease.js";
import type { FetchReason, WorkerMetrics } from "./metrics.js";
import type { RetryState } from "./retry.js";
import type { StatusSink } from "./status.js";
import type { OpenWindow } from "./windows.js";

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
  /**
   * A write joined a commit window that stays open: what it edits, known before the window closes
   * (a save, which closes its window at once, is only decided).
   */
  onWriteGathered?(w: Pick<WriteDecided, "target" | "editedObjects">): void | Promise<void>;
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

export type PublishResult =
  | { ok: true; tip: string | undefined; folders?: TargetName[] }
  | { ok: false; cause: string };

export type FlushResult =
  | {
      ok: true;
      tip: string | undefined;
      folders?: TargetName[];
      /**
       * The last inbox entry read when the flush closed the windows ("0-0" when none ever was):
       * every write accepted up to it is published in `tip`, refused or frozen; a write after it
       * may not be.
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

/** The services a branch worker's step uses: fixed for its life. */
export interface BranchContext {
  readonly o: BranchWorkerOptions;
  readonly key: string;
  readonly inbox: Inbox;
  readonly clock: Clock;
  readonly metrics: WorkerMetrics;
  readonly log: Logger;
  readonly hooks: BranchHooks;
  /** Aborted when the worker stops: every Git call under way ends. */
  readonly stopSignal: AbortSignal;
  /** The lease's token; LostLeaseError once the lease is lost. */
  token(): string;
}

/** The commits built on a base for the pending writes, reused until the base moves. */
export interface Built {
  base: string | undefined;
  commits: Array<{
    pending: PendingWrite;
    commit: string | undefined;
    carriedBy: string | undefined;
    newOids: string[];
  }>;
}

/**
 * Inbox entries on their way out: settled with the next settle, or handed on to hooks that save
 * them (`savesEntries`) and waiting for `saved` (queue/worker/entry-ledger.ts).
 */
export interface EntryLedger {
  /**
   * Entries handed to hooks that save them, by entry id with their charge: each leaves the inbox
   * once `saved` says so. Settled on the handing alone, a stop before the save lost a `done`
   * marker's mark and held its GitTarget behind the barrier for good (soak --mirror seed 131015).
   */
  readonly awaitingSave: Map<string, number>;
  /** Entries `saved` named since the last step. */
  savedEntries: string[];
  /** Entries settled (notices, refused or discarded writes), removed with the next settle. */
  doneEntries: SettledEntry[];
  /** Writes settled as refused, recorded with the next settle. */
  refusedWrites: Array<{ id: string; reason: string }>;
}

/** What the GitTargets were last told (queue/worker/target-status.ts). */
export interface TargetStatusState {
  /** The last publication report written, as a signature of what a reader sees. */
  lastReport: string;
  /** GitTargets the last report was written to: one listed since gets it without waiting for news. */
  readonly reportedTo: Set<string>;
  /** The status report being written, and whether another waits behind it. */
  writing: Promise<void>;
  queued: boolean;
  /** GitTargets whose last settled write was refused (WriteRefused True until one publishes). */
  readonly refusedTargets: Set<string>;
}

/** A read of which GitTargets' folders a tip holds, and what it was read for. */
export interface FolderRead {
  key: string;
  present: TargetName[];
}

/** Foreign commits between two commits (`from..to`), null where the range is not known. */
export type ForeignRanges = Map<string, Array<{ oid: string; parent?: string }> | null>;

/** A `done` marker of the watch plane's initial snapshots, waiting for the writes before it. */
export interface SnapshotMark {
  target: TargetName;
  token: string;
  entryId: string;
  charge: number;
}

export interface BranchState {
  /** The last inbox entry read ("0" before the first read). */
  lastEntryId: string;
  /** Every write read and not settled yet, by write id (in a window, pending, frozen or judged). */
  readonly held: Map<string, HeldWrite>;
  /** Writes held until the decision core judged them (a snapshot's, a watched applier write), by write id. */
  readonly judging: Map<string, HeldWrite & { stage: "snapshot" | "applier" }>;
  /** The decision core's judgements of held writes, carried out at the next step. */
  verdicts: Array<{ writeId: string; mirror: boolean }>;
  /**
   * `done` markers read, waiting for the writes before them to be published. A marker's entry
   * stays in the inbox until then, so a new owner of the branch reads it again: were it settled
   * on reading, an owner that stopped before the publication would take the mark with it and the
   * GitTarget would stay behind the barrier until the mirror's next round.
   */
  snapshotMarks: SnapshotMark[];
  /** Inbox entries on their way out (settled, or handed on and waiting for their save). */
  readonly ledger: EntryLedger;
  readonly windows: Map<string, OpenWindow<HeldWrite>>;
  /** Writes of suspended GitTargets, in arrival order: held, charged, never decided or published. */
  readonly frozen: Map<string, HeldWrite[]>;
  pending: PendingWrite[];
  seq: number;
  /** Windows closed since the last announcement to onWriteDecided. */
  decided: PendingWrite[];
  /** Writes that joined a window still open since the last announcement to onWriteGathered. */
  gathered: HeldWrite[];
  built: Built;
  remoteTip: string | undefined;
  /** The first read of the remote is done. */
  baselined: boolean;
  /** The first read of the remote has begun (it holds a baseline slot, or reads). */
  firstReadBegun: boolean;
  readonly pushedByUs: Set<string>;
  retry: RetryState | undefined;
  /** Why publication retries, when it is something the GitTargets should say (BaseBranchMissing). */
  retryReason: string | undefined;
  paused: boolean;
  /** What the intake gate was last told (budget, retry pending) and held (charged bytes). */
  intake: { budget: number; retrying: boolean; chargedBytes: number } | undefined;
  lastPushAt: number;
  lastPublishedAt: number | undefined;
  nextFetchAt: number;
  observeAsked: FetchReason | undefined;
  /** The commit the last push notice names, for the next observation's download. */
  noticeHint: string | undefined;
  /** Flushes asked, answered by the next step. */
  flushes: Array<(r: FlushResult) => void>;
  /** The publication cycle under way: its Git calls end when its deadline passes. */
  cycleSignal: AbortSignal | undefined;
  stopped: boolean;
  /** The branch's GitTargets as last read (the spec at takeover, then every update). */
  targets: TargetSpec[];
  /** GitTargets naming the branch that may not write it (their GitProvider does not admit them). */
  refusedSpecs: RefusedTarget[];
  /** Where a branch that does not exist yet starts (the `spec.baseBranch` named). */
  baseBranch: string | undefined;
  /** The commit a branch that does not exist yet is built on, read at each publication. */
  startFrom: string | undefined;
  specReadAt: number;
  /**
   * The GitProvider's remote as last listed: its current credentials. A rotated, added or removed
   * credential is used (or no longer used) from the next Git call on.
   */
  remoteNow: Remote;
  /** The last read of a tip's folders, kept while the tip and the GitTargets' folders are the same. */
  folderRead: FolderRead | undefined;
  /** Foreign commits between two commits, kept per pair (commits never change). */
  readonly foreignRanges: ForeignRanges;
  /** What the GitTargets were last told. */
  readonly status: TargetStatusState;
}

export function newBranchState(spec: BranchSpec): BranchState {
  return {
    lastEntryId: "0",
    held: new Map(),
    judging: new Map(),
    verdicts: [],
    snapshotMarks: [],
    ledger: { awaitingSave: new Map(), savedEntries: [], doneEntries: [], refusedWrites: [] },
    windows: new Map(),
    frozen: new Map(),
    pending: [],
    seq: 0,
    decided: [],
    gathered: [],
    built: { base: undefined, commits: [] },
    remoteTip: undefined,
    baselined: false,
    firstReadBegun: false,
    pushedByUs: new Set(),
    retry: undefined,
    retryReason: undefined,
    paused: false,
    intake: undefined,
    lastPushAt: Number.NEGATIVE_INFINITY,
    lastPublishedAt: undefined,
    nextFetchAt: 0,
    observeAsked: undefined,
    noticeHint: undefined,
    flushes: [],
    cycleSignal: undefined,
    stopped: false,
    targets: spec.targets,
    refusedSpecs: spec.refused ?? [],
    baseBranch: spec.baseBranch,
    startFrom: undefined,
    specReadAt: Number.NEGATIVE_INFINITY,
    remoteNow: spec.remote,
    folderRead: undefined,
    foreignRanges: new Map(),
    status: {
      lastReport: "",
      reportedTo: new Set(),
      writing: Promise.resolve(),
      queued: false,
      refusedTargets: new Set(),
    },
  };
}

/**
 * What is under way that handing the branch over would interrupt, each named; none: the branch
 * is quiet. Balancing hands over only a quiet branch (docs/design/balancing.md).
 */
export function underWay(s: BranchState): string[] {
  const checks: Array<[string, boolean]> = [
    ["the first read of the remote", !s.baselined],
    ["writes read and not settled", s.held.size > 0],
    ["writes waiting for their judgement", s.judging.size > 0],
    ["writes of suspended GitTargets", s.frozen.size > 0],
    ["open commit windows", s.windows.size > 0],
    ["pending writes", s.pending.length > 0],
    ["entries waiting for their save", s.ledger.awaitingSave.size > 0],
    ["a flush asked", s.flushes.length > 0],
    ["a publication cycle", s.cycleSignal !== undefined],
    ["a publication retry", s.retry !== undefined],
    ["a read of the remote asked", s.observeAsked !== undefined],
  ];
  return checks.filter(([, busy]) => busy).map(([what]) => what);
}

/** The remote, its calls bound to the cycle under way (or to the worker's life). */
export function remoteOf(ctx: BranchContext, s: BranchState): Remote & { signal: AbortSignal } {
  return { ...s.remoteNow, signal: s.cycleSignal ?? ctx.stopSignal };
}

/** Whether a GitTarget (`namespace/name`) is suspended. */
export function isSuspended(s: BranchState, target: string): boolean {
  return s.targets.some((t) => t.suspended === true && `${t.namespace}/${t.name}` === target);
}

/** Writes settled (landed, refused or discarded): they leave every window and pending write. */
export function forget(s: BranchState, ids: Set<string>): void {
  for (const id of ids) s.held.delete(id);
  const keep = (h: HeldWrite) => s.held.has(h.write.id);
  s.pending = s.pending
    .map((p) => ({ ...p, writes: p.writes.filter(keep) }))
    .filter((p) => p.writes.length > 0);
  // The pending writes changed, so the checkout is rebuilt from the tip.
  s.built = { base: undefined, commits: [] };
  for (const w of [...s.windows.values()]) {
    w.writes = w.writes.filter(keep);
    if (w.writes.length === 0) s.windows.delete(w.target);
  }
}
