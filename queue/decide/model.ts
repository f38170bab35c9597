/**
 * The branch worker's decision state, the events it is fed and the actions it returns.
 *
 * Everything here is plain data (records, arrays, strings, numbers): a state can be written to
 * Redis as JSON and read back, and nothing in it depends on the process that made it. Times are
 * epoch milliseconds and always come in with the event; the core never reads a clock.
 */
import type {
  Ancestry,
  ApplierRef,
  ApplierWriteReport,
  Attempt,
  ClaimRef,
  ObjectRef,
  PhaseReport,
  ReportPhase,
  SnapshotStamp,
} from "../contract.js";
import type {
  ClaimGate,
  ForeignRead,
  OverrideUse,
  SignatureRead,
  TargetGovernance,
} from "../governance/model.js";

export type { ForeignRead, SignatureRead };

/**
 * Why an apply is due, as the core tracks it. `Adopt`, `Requested` and `Converge` are all sent as
 * the contract's `CatchUp`; they are kept apart because a converge of the commit the applier last
 * applied asks nothing, while an adopt, or an apply a person asked for (`applygate reconcile`,
 * the claim's reconcile annotation), is never skipped.
 */
export type PendingKind = "ForeignCommit" | "Repair" | "Refusal" | "Adopt" | "Requested" | "Converge";

/** Pending reasons of one applier: for every target it covers, and per target uid. */
export interface PendingReasons {
  /** Reasons that hold for every target naming the applier when the attempt is sent. */
  all: PendingKind[];
  /** Reasons that hold for one target, by uid. */
  byTarget: Record<string, PendingKind[]>;
}

/** An edit decided into Git that an apply window must guard (it is not in the window's commit). */
export interface GuardedEdit {
  object: string;
  targetUid: string;
  /** Whole seconds since the epoch: managedFields resolve to the second. */
  editedAtSec: number;
}

/** One apply window: from the send of an attempt until its operation completed, plus the grace. */
export interface ApplyWindow {
  token: string;
  commit: string;
  sentAt: number;
  /** When the worker learned the operation completed; null while it is out. */
  completedAt: number | null;
  edits: GuardedEdit[];
  /**
   * The applier's writes that could be this window's apply, newest second per object: an edit
   * decided after its write was judged (the write reached the worker first) is checked against
   * them. Absent in a state saved before it existed.
   */
  writes?: AppliedWrite[];
}

/** An applier write seen in a window. */
export interface AppliedWrite {
  ref: ObjectRef;
  object: string;
  writtenAtSec: number;
}

/** The one operation out for an applier: what its attempt carried away. */
export interface OperationOut {
  token: string;
  commit: string;
  sentAt: number;
  /** "Sent" until the executor's first report. */
  phase: ReportPhase | "Sent";
  carried: PendingReasons;
  /** The change-window override this attempt used, if it went outside the windows. */
  override?: string;
  /**
   * A foreign tip arrived after the send: the operation is for an older commit than the one the
   * applier is asked for now, so an end without success starts no backoff.
   */
  overtaken?: boolean;
  /** How the operation was last judged against the tip (`judgeSupersession`), at that tip. */
  supersession?: { tip: string; superseded: boolean; why?: string };
  /** The tip whose supersession asked the executor to end the operation (asked once). */
  endAsked?: string;
  /** The applier's own retry the operation waits for (Argo CD's sync retry), as last reported. */
  retry?: ApplierRetry;
  /** The executor's last message about it (the applier's own words). */
  message?: string;
  /**
   * Sent by an earlier owner of the branch and followed here since a restart (`restart`): its end
   * report may have reached that owner only, so its claim's record can end it too (`readClaims`).
   */
  inherited?: true;
  /**
   * The end its claim's record showed at a check while no end report had come: the next check
   * still showing it ends the operation from the record (its report was lost).
   */
  recordedEnd?: "Succeeded" | "Failed" | "Superseded";
  /**
   * At the last check no queue held its attempt unfinished and its claim recorded nothing of it:
   * the next check finding the same ends it RequestFailed (`AttemptLost`).
   */
  missing?: true;
}

/** An applier's own retry inside one operation: which attempt comes next, of how many, and when. */
export interface ApplierRetry {
  /** The attempt that comes next, counting the first one (Argo CD's retryCount + 1). */
  attempt: number;
  /** How many attempts the operation makes at most; absent: no limit. */
  of?: number;
  /** When it comes (epoch ms). */
  at: number;
}

/** How an attempt that did not succeed ended, for the claim's Retrying condition. */
export interface AttemptEnd {
  phase: ReportPhase;
  commit: string;
  reason?: string;
  message?: string;
}

/** The applier unit: held by one claim; key is `claimKey(claim)`. */
export interface ApplierState {
  claim: ClaimRef;
  applier: ApplierRef;
  /** The source it reads (a GitRepository, an Argo CD repo); appliers sharing it take turns. */
  source: string;
  pending: PendingReasons;
  operation: OperationOut | null;
  /** Commit the last succeeded operation applied. */
  lastAppliedCommit: string | null;
  /**
   * Consecutive attempts for the commit asked now that did not succeed (Stale excluded): 0 after a
   * success, and again when a foreign tip arrives (a new commit is a new request).
   */
  failures: number;
  /** Not due before this time (backoff). */
  notBefore: number;
  /** When it was last sent an attempt; the oldest turn on a shared source goes first. */
  lastTurnAt: number;
  windows: ApplyWindow[];
  /** What the claim's status was last told about repairPending. */
  repairRecorded: boolean;
  /**
   * When an attempt of the current chain first ended Stale for an edit accepted after its flush
   * mark (`EditedAfterFlush`); null once an attempt ends any other way than Stale. Bounds the edit
   * recheck. Absent in a state saved before it existed.
   */
  restaleSince?: number | null;
  /**
   * The change-window override used last (null: none, or given back); absent: not known here, the
   * claim's status says (`TargetGovernance.overrideUsed`).
   */
  overrideUsed?: OverrideUse | null;
  /** What the claim was last told of governance (`ClaimGate`, as JSON). */
  gateRecorded?: string;
  /** The foreign commits between the commit it last applied (`since`) and `tip`, as the shell read them. */
  foreignRead?: ForeignRead;
  /** The claim's reconcile annotation value last taken as a request (absent: none known here). */
  reconcileHandled?: string;
  /** What the claim's status was last told of it (`lastHandledReconcileAt`). */
  reconcileRecorded?: string;
  /** How the last attempt that did not succeed ended (cleared by a success). */
  lastEnd?: AttemptEnd;
  /** What the claim was last told of its retry (`RetryView`, as JSON; "null": nothing waited for). */
  retryRecorded?: string;
}

/** The GitTarget unit, by uid. */
export interface TargetState {
  uid: string;
  namespace: string;
  name: string;
  /** Key of the claim it names now, or null. */
  claim: string | null;
  onRefusal: "Ignore" | "Reapply";
  suspended: boolean;
  /** Its folder on the branch (`spec.path`), when the listing gave it: what the edit recheck watches. */
  path?: string;
  /** Claims this incarnation has named: a first naming converges once. */
  named: string[];
  /**
   * The tip whose tree the worker last read and found its folder in, or null. The barrier passes
   * only while this is the tip now: until then its applier is asked for nothing. Absent in a state
   * saved before it existed (read as null).
   */
  folderAt: string | null;
  /** Change windows and the claim's override, as the listing read them. */
  governance?: TargetGovernance;
  /**
   * The watch plane's coverage token (`<mirror instance>:<round>`) while a live mirror covers it
   * (the listing read it); null or absent: no WatchRule, or no mirror alive.
   */
  watch?: string | null;
  /** The coverage token whose initial snapshots are published (the barrier passes when it is `watch`). */
  initialSnapshotsAt?: string | null;
  /** Its snapshots held while Git is ahead (absent: none ever was). */
  snapshots?: SnapshotHold;
  /** When a Refusal was last made pending for it (at most one a minute). */
  lastRefusalAt: number | null;
  /** A refusal inside the minute waits for this time, carried by one trailing request. */
  trailingRefusalAt: number | null;
}

/**
 * A pending write as the decisions keep it: decided, not yet known published. `entryId` is the
 * inbox entry id of its last write (unique and ordered), what `Published.upToMark` names.
 */
export interface PendingWrite {
  entryId: string;
  seq: number;
  targetUid: string;
  /** It created objects: an adopt is due once it is published. */
  created: boolean;
  edits: GuardedEdit[];
}

export interface BranchIdentity {
  key: string;
  repository: string;
  branch: string;
}

/** The branch unit and everything the worker decides with. */
export interface DecisionState {
  branch: BranchIdentity;
  /** Tokens are `${tokenPrefix}-${nextToken}`: the shell picks a prefix unique to the process start. */
  tokenPrefix: string;
  nextToken: number;
  /** The first observation after a start has been seen (the baseline). */
  observed: boolean;
  /** The remote tip as last observed or published; null for an empty branch. */
  tip: string | null;
  writeSeq: number;
  unpublished: PendingWrite[];
  /** The flush in progress: the worker waits for its publication before sending. */
  flush: { id: number; startedAt: number } | null;
  nextFlushId: number;
  flushFailures: number;
  flushNotBefore: number;
  targets: Record<string, TargetState>;
  appliers: Record<string, ApplierState>;
  /** The earliest wake asked of the shell, to avoid repeating it. */
  wakeAt: number | null;
  /**
   * The worker's own publications, newest last (bounded): the commits after `base` up to `tip`
   * on the first-parent line are its own and need no approval. Absent in an older state.
   */
  published?: { tip: string; base: string | null }[];
  /**
   * The apply epoch: raised at every send of an attempt and at every end of one (and at a
   * restart, which may have missed an end). A snapshot collected under another epoch overlapped an
   * apply. Absent in an older state (read as 0).
   */
  applyEpoch?: number;
}

// ---------------------------------------------------------------------------------------------
// Events

export interface ListedTarget {
  uid: string;
  namespace: string;
  name: string;
  /** The claim the GitTarget names, or null. */
  claim: ClaimRef | null;
  /** The applier that claim holds (known from the claim's spec). */
  applier: ApplierRef | null;
  /** Key of the source the applier reads, e.g. `flux/ns/gitrepository-name`. */
  source: string | null;
  onRefusal: "Ignore" | "Reapply";
  suspended: boolean;
  /** Its folder on the branch (`spec.path`). */
  path?: string;
  /** Change windows and the claim's override (absent: none). */
  governance?: TargetGovernance;
  /** The live watch plane's coverage token for it (absent: not covered). */
  watch?: string;
  /**
   * The claim's reconcile annotation (`requestedAt`) and the value its status says was taken
   * (`handled`): a value not taken yet is a request for an apply.
   */
  reconcile?: { requestedAt?: string; handled?: string };
}

/** What the worker read in the tree of one commit: the GitTargets (uids) whose folder it holds. */
export interface FolderRead {
  commit: string;
  present: string[];
}

/** The status of one claim, as read back after a start. */
export interface ClaimStatusSnapshot {
  claim: ClaimRef;
  applier: ApplierRef;
  source: string;
  lastAppliedCommit?: string;
  repairPending?: boolean;
  operation?: {
    token: string;
    phase: ReportPhase;
    commit: string;
    targets: { uid: string; reason: string }[];
    /** When the executor recorded the operation (RFC 3339), before the write that starts it. */
    requestedAt?: string;
  };
}

/**
 * An object a write changed, with when the edit happened on the cluster (RFC 3339) and when the
 * write carrying it reached the inbox (epoch ms, when known).
 */
export interface EditedObject {
  ref: ObjectRef;
  editedAt: string;
  arrivedAt?: number;
}

export type DecisionEvent =
  /**
   * News of the remote tip. `pushedByUs`: the tip is a push of this worker's. `folders`: the
   * GitTargets (uids) whose folder the tip's tree holds; absent, no folder is proven at this tip.
   */
  | { type: "Observed"; tip: string | null; pushedByUs: boolean; folders?: string[] }
  /**
   * The complete list of GitTargets writing this branch, with what the worker last read of its
   * tip's tree (a new GitTarget's folder is proven without waiting for the next observation).
   */
  | { type: "TargetsListed"; targets: ListedTarget[]; folders?: FolderRead }
  /** A write was decided (a window closed, a save): it joins the pending writes in this order. */
  | {
      type: "WriteDecided";
      /** The inbox entry id of the pending write's last write. */
      entryId: string;
      targetUid: string;
      /** Objects the write created in the target's folder: an adopt is due for its applier. */
      createdObjects: ObjectRef[];
      /** Every object the write changed. */
      editedObjects: EditedObject[];
    }
  /**
   * A write joined a commit window that stays open (it is decided when the window closes): its
   * edits are guarded by the apply windows open at its arrival from now on, so a late apply over
   * it makes a Repair due before the window closes.
   */
  | { type: "WriteGathered"; targetUid: string; editedObjects: EditedObject[] }
  | { type: "RefusalReceived"; targetUid: string }
  /**
   * Pending writes up to `upToMark` (inclusive, in decided order) are in Git and `tip` is the
   * branch now, a push of ours. `flush` names the flush this publication answers, if any.
   * `folders`: the GitTargets (uids) whose folder the tip's tree holds, as in `Observed`.
   */
  | {
      type: "Published";
      upToMark: string | null;
      tip: string;
      flush?: number;
      folders?: string[];
      /**
       * The last inbox entry the flush had read when it closed the windows (its mark as an inbox
       * position): a write accepted after it is not in `tip`. The attempts it sends carry it.
       */
      inboxMark?: string;
    }
  /** The flush could not publish (remote down, rejected until the retry budget ran out). */
  | { type: "FlushFailed"; flush: number }
  | { type: "Report"; report: PhaseReport }
  | { type: "ApplierWrite"; report: ApplierWriteReport }
  /**
   * The watch plane saw a write of an applier's own managers alone to an object of a GitTarget's
   * folder (the inbox write `writeId`, held by the shell until it is judged).
   */
  | {
      type: "WatchedApplierWrite";
      writeId: string;
      targetUid: string;
      ref: ObjectRef;
      manager: string;
      /** managedFields time of the applier's entry (RFC 3339). */
      writtenAt: string;
      /**
       * When the write reached the branch's inbox (epoch ms): it is judged against the windows as
       * they were then, however late an owner reads it. Absent: judged as of the step's time.
       */
      arrivedAt?: number;
    }
  /**
   * A write of a snapshot the watch plane collected (the inbox write `writeId`, held by the shell
   * until it is judged): used, or discarded while Git is ahead.
   */
  | { type: "SnapshotWrite"; writeId: string; targetUid: string; snapshot: SnapshotStamp }
  /** The watch plane started a round (`token`) of this GitTarget's initial snapshots: it covers it. */
  | { type: "InitialSnapshotsStarted"; targetUid: string; token: string }
  /** Every write before the watch plane's `done` marker of `token` for this GitTarget is settled. */
  | { type: "InitialSnapshotsPublished"; targetUid: string; token: string }
  /** The shell read the foreign commits since each applier's last applied commit, by claim key. */
  | { type: "CommitsRead"; reads: Record<string, ForeignRead> }
  /**
   * What the clone answered of an operation's commit against the tip (`ancestryReadsAsked`): is
   * `commit` a proper ancestor of `tip`?
   */
  | { type: "AncestryRead"; token: string; commit: string; tip: string; ancestry: Ancestry }
  /** The timer of the last ScheduleWake fired (the shell holds no timer until the next one). */
  | { type: "Tick" }
  /**
   * A check of the operations out it reads (`operationsToCheck`): the claims' status, and
   * `queued`, the tokens of those whose attempt the attempts queues still hold unfinished (read
   * before the claims; absent when the queues cannot tell).
   */
  | { type: "ClaimsRead"; claims: ClaimStatusSnapshot[]; queued?: string[] }
  /**
   * The worker (re)started: a fresh baseline, operations and repairPending from claim status.
   * `queued`: tokens of the saved state's operations out whose attempt the attempts queue still
   * holds unfinished (waiting for an executor, or taken by one), read before the claims: such an
   * attempt may be recorded on its claim at any moment, and is followed, never sent again.
   */
  | {
      type: "Restarted";
      tokenPrefix: string;
      claims: ClaimStatusSnapshot[];
      saved?: DecisionState;
      queued?: string[];
    };

// ---------------------------------------------------------------------------------------------
// Actions

export type DecisionAction =
  /**
   * Close the open commit windows, take the flush mark (the last write read from the inbox),
   * publish every pending write up to it now, without the cooldown, and answer with
   * `Published {flush, inboxMark}` (or `FlushFailed`). The mark is the shell's to take: only it
   * knows which writes its open windows hold.
   */
  | { type: "Flush"; flush: number }
  /** Enqueue this attempt on the applier kind's queue. */
  | { type: "SendAttempt"; attempt: Attempt }
  /** Write `status.repairPending` on the claim. */
  | { type: "RecordRepairPending"; claim: ClaimRef; pending: boolean }
  /** An attempt nothing reported ended `AttemptLost` at a check (`readClaims`): log it and count it. */
  | { type: "LogAttemptLost"; claim: ClaimRef; applier: ApplierRef; token: string; commit: string }
  /** A late apply over a newer edit was withheld: log it and count it. */
  | {
      type: "LogCollision";
      object: ObjectRef;
      claim: ClaimRef;
      applier: ApplierRef;
      commit: string;
      token: string;
      targetUid: string;
    }
  /**
   * The judgement of a watched applier write: `mirror` sends the held write on to its commit
   * window, otherwise its inbox entry is settled without a commit.
   */
  | {
      type: "SettleWatchedWrite";
      writeId: string;
      mirror: boolean;
      verdict: WatchedVerdict;
      /** The kind of the folder's applier, null when no claim holds the folder. */
      applierKind: ApplierRef["kind"] | null;
    }
  /**
   * The judgement of a snapshot write: `use` sends the held write on, otherwise its inbox entry is
   * settled without a commit (its charge returned; the recollection brings what it held). `counted`:
   * the first verdict on this snapshot that counts as discarded or used.
   */
  | {
      type: "SettleSnapshotWrite";
      writeId: string;
      use: boolean;
      verdict: SnapshotVerdict;
      counted: boolean;
      targetUid: string;
    }
  /** Ask the watch plane to collect this GitTarget's snapshots again. */
  | { type: "Recollect"; target: { uid: string; namespace: string; name: string }; bound: boolean }
  /** Write `status.lastHandledReconcileAt` on the claim: the reconcile request taken. */
  | { type: "RecordReconcileHandled"; claim: ClaimRef; requestedAt: string }
  /** Write what the claim shows of governance (`ApplyAllowed`, `status.governance`). */
  | { type: "RecordGate"; claim: ClaimRef; gate: ClaimGate }
  /**
   * A newer tip supersedes the operation `token` (for `commit`): ask its executor to end it (the
   * executor proves it again before it does) and report it `Superseded`.
   */
  | {
      type: "EndSuperseded";
      claim: ClaimRef;
      applier: ApplierRef;
      token: string;
      commit: string;
      tip: string;
    }
  /** Write the claim's Retrying condition: what it waits for before its next attempt (null: nothing). */
  | { type: "RecordRetry"; claim: ClaimRef; retry: RetryView | null }
  /** Feed a `Tick` at (or after) this time. Replaces any earlier wake. */
  | { type: "ScheduleWake"; at: number };

/** What a claim waits for before its next attempt (its Retrying condition). */
export interface RetryView {
  /** Whose wait it is: the branch worker's backoff, or the applier's own retry inside an operation. */
  by: "worker" | "applier";
  /** The commit the next attempt is for. */
  commit: string;
  /** The attempt that comes next, counting the first one. */
  attempt: number;
  /** How many attempts there are at most (the applier's retry limit); absent: no limit. */
  of?: number;
  /** When it comes (epoch ms). */
  at: number;
  /** How the last attempt ended. */
  after?: AttemptEnd;
}

export interface StepResult {
  state: DecisionState;
  actions: DecisionAction[];
}

/** A GitTarget's stale snapshots. */
export interface SnapshotHold {
  /** The first discard of the hold now running; null when none runs. */
  since: number | null;
  /**
   * When a fresh collection was last asked for since the last discard; null (or absent, in a state
   * saved before asks were repeated) when none was.
   */
  recollectAskedAt?: number | null;
  /** Snapshots discarded: every later write of one is discarded too. */
  discarded: string[];
  /** Snapshots used as stale under the bound: every later write of one is used too. */
  used: string[];
}

/**
 * `exempt`: initial, or no trigger on the branch. `fresh`: collected and arriving while Git was not
 * ahead, in one epoch. `discarded`: stale, held. `used`: stale, let through by the 5-minute bound.
 */
export type SnapshotVerdict = "exempt" | "fresh" | "discarded" | "used";

/** What the one judge says of a watched write of the applier's own managers. */
export type WatchedVerdict =
  /** The apply landing: its content is the commit's, which Git holds. Not mirrored. */
  | "not_mirrored"
  /** A late apply over a newer edit: Git keeps the edit, a Repair is due. Not mirrored. */
  | "withheld"
  /** No window could be its apply (an echo after the grace, an apply somebody else started): mirrored. */
  | "late"
  /** An edit of the window is newer than the applier's entry: the API's undo left it newest. Mirrored. */
  | "undo";
