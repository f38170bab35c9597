/**
 * What an applier kind (Flux, Argo CD, webhook) plugs into the shared sidecar. The sidecar owns the queue,
 * the reports, the claim status, eligibility, ranking, the finalizer and Events; a kind owns what
 * it writes to its applier and how it reads the applier's status.
 */
import type { Redis } from "ioredis";
import type { ApplierKind, Attempt, ClaimRef, ReportPhase, SupersededNotice } from "../queue/contract.js";
import type { StatusReason } from "../queue/crds/reasons.js";
import type { KObject, Kube } from "../queue/kube/index.js";
import type { Logger } from "../queue/log.js";
import type { ConditionInput } from "./claims/conditions.js";
import type { ApplierSource } from "./claims/eligibility.js";
import type { EventRecorder } from "./events.js";
import type { Following } from "./following.js";
import type { GitAncestry } from "./git-ancestry.js";
import type { ClaimLocator, Operation } from "./operation-record.js";
import type { Reporter } from "./reporter.js";
import type { Standing } from "./standing.js";
import type { SupersessionSource } from "./supersessions.js";
import type { FreshnessCheck, TipCheck } from "./tip-check.js";

export interface ReportExtra {
  /** Machine reason (DependencyNotReady, OperationUnfollowed, SuspendOwnedElsewhere, …). */
  reason?: string;
  message?: string;
  /** Flux: the Kustomization applied another revision than the one asked for. */
  revisionMismatch?: boolean;
  /** Defaults to the attempt's commit. */
  commit?: string;
  /** Running, waiting for the applier's own retry: the attempt that comes next, of how many, and when. */
  retry?: { attempt: number; of?: number; at: string };
}

/** Sends one PhaseReport for the operation being carried out. */
export type ReportFn = (phase: ReportPhase, extra?: ReportExtra) => Promise<void>;

/** An operation this process carries out or follows: a branch worker's attempt or a recovered record. */
export interface OperationExecutor {
  /**
   * Carries out one attempt and follows it to its observed end, reporting every phase. Resolve
   * after reporting a terminal phase (Succeeded, Failed, RequestFailed, Rejected, Dropped,
   * Stale). A throw is reported as RequestFailed with the error's message. Never retry: every
   * retry is the branch worker's decision. `signal` aborts on a graceful stop.
   */
  execute(attempt: Attempt, report: ReportFn, signal: AbortSignal): Promise<void>;
  /**
   * Follows an operation found recorded and in flight on a claim this process does not follow
   * (restart recovery), by its recorded tokens, asking the applier for nothing new. Optional: a
   * kind without it leaves such operations to ClaimController.settleUnfollowed.
   */
  recover?(recovered: RecoveredOperation, report: ReportFn, signal: AbortSignal): Promise<void>;
  /** Graceful stop, after every running execute has seen its signal abort (Flux suspends what it resumed). */
  shutdown?(): Promise<void>;
  /**
   * The branch worker found the operation this process follows superseded by a newer tip: end it
   * if the applier can be stopped (Argo CD), once proven again, and report it Superseded. A kind
   * without it lets the operation run to its end.
   */
  supersede?(notice: SupersededNotice): void;
}

export interface RecoveredOperation {
  claim: ClaimLocator;
  applier: { namespace: string; name: string };
  operation: Operation;
  branchKey: string;
}

/** Whether the claim may hold its applier, by the kind's own rules. */
export type ExternalCheck =
  | { configured: true }
  /** Configured=False with this reason (SuspendOwnedElsewhere, OwnedByApplicationSet, …); nothing is held. */
  | { configured: false; reason: string; message: string }
  /** Cannot be judged yet (applier missing, read failed): Configured=Unknown, keep any hold. */
  | { configured: "Unknown"; reason: string; message: string };

/** What the reconciler hands to every hook. */
export interface ClaimContext {
  kube: Kube;
  log: Logger;
  events: EventRecorder;
  following: Following;
  now: () => Date;
  /** The claim's in-flight operation, when it has one (read uncached just before the hook). */
  operation?: Operation;
  /** The branch key of the eligible GitTargets (undefined when none is eligible). */
  branchKey?: string;
  /** Another claim in line that can take the applier over: leave it held for that one. */
  successor?: string;
  /** When InControl turned Releasing (hand-back in progress), for the kind's own messages. */
  releasingSince?: Date;
  /**
   * Has this process follow an operation recorded on the claim that nobody here follows (Flux: an
   * external resume it recorded), the way restart recovery does: through the executor host, which
   * registers it as followed, reports its phases and stops it on a graceful stop. False when it
   * cannot now (followed already, ended here, the claim busy, stopping).
   */
  follow(operation: RecoveredOperation): boolean;
}

export interface HoldResult {
  /** InControl and Ready (and Configured only to override the reconciler's Configured=True). */
  conditions: ConditionInput[];
  /** Status fields of the kind to merge (previousSuspendState, repairPending, …). */
  status?: Record<string, unknown>;
  /** Ask to be called again this soon (e.g. waiting for a suspend token), besides the resync. */
  requeueAfterMs?: number;
}

export interface HandBackResult {
  /**
   * The applier is handed back (or over, or gone): the finalizer may be removed. The reconciler
   * records the one Event of the outcome (Released, or HandedOver for a successor), its note the
   * message of the InControl condition returned.
   */
  done: boolean;
  conditions?: ConditionInput[];
  status?: Record<string, unknown>;
  requeueAfterMs?: number;
  /**
   * Not done: how the applier stands now ("suspended under applygate"), said by the Warning
   * ReleaseFailed and the claim's InControl condition should the release deadline pass.
   */
  leftAs?: string;
}

/** The claim lifecycle of one applier kind. Every hook is idempotent: it runs on every pass. */
export interface ClaimController {
  /** The claim's applier reference (spec.kustomizationRef / spec.applicationRef). */
  applierOf(claim: KObject): { namespace: string; name: string };
  /** What the applier's source fetches, for eligibility. */
  source(
    claim: KObject,
    applier: { namespace: string; name: string },
    ctx: ClaimContext,
  ): Promise<ApplierSource>;
  /** The kind's refusals to hold, checked before any write to the applier. */
  checkExternal(
    claim: KObject,
    applier: { namespace: string; name: string },
    ctx: ClaimContext,
  ): Promise<ExternalCheck>;
  /**
   * Holds the applier (adopt, re-hold after an external resume or switch-on). Called only for the
   * claim that holds the applier in line, Configured, with the finalizer in place.
   */
  hold(claim: KObject, applier: { namespace: string; name: string }, ctx: ClaimContext): Promise<HoldResult>;
  /**
   * Hands the applier back (deleted or no longer referenced), or leaves it held for ctx.successor.
   * Called on every pass until it returns done. The release deadline is the reconciler's alone
   * (10 minutes from Releasing): past it, the claim lets go with a Warning ReleaseFailed. A kind
   * records no Event of the outcome itself.
   */
  handBack(
    claim: KObject,
    applier: { namespace: string; name: string },
    ctx: ClaimContext,
  ): Promise<HandBackResult>;
  /**
   * An operation in flight that nobody in this process has followed for over a minute: make the
   * applier safe (Flux: suspend with a token and wait for it). Return true once it is, and the
   * reconciler completes the operation Failed (OperationUnfollowed). Default: true at once.
   */
  settleUnfollowed?(
    claim: KObject,
    applier: { namespace: string; name: string },
    operation: Operation,
    ctx: ClaimContext,
  ): Promise<boolean>;
  /** Optional start/stop for the kind's own watches; `requeue` re-runs the claims of an applier. */
  start?(hooks: { requeueApplier(namespace: string, name: string): void }): Promise<void>;
  stop?(): Promise<void>;
}

/** Observes the applier's own writes while an apply window is open (sidecar/window-observer.ts). */
export interface WindowObserver {
  start?(): Promise<void>;
  stop(): Promise<void>;
}

/** The apply window of one operation, as its executor opens it. */
export interface WindowOpening {
  token: string;
  claim: ClaimRef;
  branchKey: string;
  /** The applier whose writes the window reports (the Kustomization, the Application, the WebhookClaim). */
  applier: { namespace: string; name: string };
  /**
   * The operation started before this process (a recovery): the objects as listed are judged too,
   * for the applier's writes made since then while nobody watched.
   */
  missedSince?: string;
}

/** How an executor opens and closes the apply windows of its operations; `W`: what its kind adds. */
export interface WindowHooks<W extends WindowOpening = WindowOpening> {
  /**
   * Opens the window (again: no change), just before the write that starts the apply: the applier
   * may apply before its answer is read. Resolves once the window watches (Flux lists the
   * inventory's kinds first; the others watch from their start).
   */
  open(w: W): Promise<void>;
  /** The operation ended (or never started): the window takes writes for its grace more. */
  close(token: string): void;
}

/**
 * An attempt that started nothing: returned (never thrown) by every step before the write that
 * starts the apply, and reported as its end; the record, when made, is taken back.
 */
export interface NotStarted {
  notStarted: true;
  phase: "RequestFailed" | "Rejected" | "Stale" | "Dropped";
  reason: StatusReason;
  message: string;
}

export const notStarted = (
  phase: NotStarted["phase"],
  reason: StatusReason,
  message: string,
): NotStarted => ({
  notStarted: true,
  phase,
  reason,
  message,
});

export const isNotStarted = (r: unknown): r is NotStarted =>
  typeof r === "object" && r !== null && "notStarted" in r && r.notStarted === true;

/** Whether the attempt's decision still holds at the write (`recheckStanding`: claim, grant, GitTargets). */
export type StandingCheck = (attempt: Attempt) => Promise<Standing>;

/**
 * The checks every kind must ask before the write that starts an apply. They are the shared
 * safety rules, so a kind cannot be built without them: a missing tip check once meant an
 * Argo CD sync was never Stale.
 */
export interface SafetyChecks {
  /** Whether the attempt's commit is still the tip the branch worker recorded (after the record). */
  tip: TipCheck;
  /** The last look just before the write: the tip again and the edit recheck (`Attempt.editsAfter`). */
  freshness: FreshnessCheck;
  /** The decision still holds: the claim in control, the namespace's grant, a GitTarget standing. */
  standing: StandingCheck;
}

/** Everything a kind module gets to build its parts; `O` is the kind's own settings. */
export interface ApplierDeps<O = unknown> {
  kind: ApplierKind;
  kube: Kube;
  log: Logger;
  events: EventRecorder;
  following: Following;
  reporter: Reporter;
  redis?: Redis;
  /** The Redis key prefix `redis` is used under. */
  redisPrefix?: string;
  now: () => Date;
  /** The sidecar's own Git clones (one set per process; a kind that reads Git uses these). */
  git?: GitAncestry;
  checks: SafetyChecks;
  /** The operations the branch worker found superseded, and the tip it records (absent: none is ended). */
  supersessions?: SupersessionSource;
  /** Settings the kind reads (timeouts, intervals), typed by the kind. */
  options: O;
}

/** What a kind hands the shared sidecar. */
export interface ApplierKindParts {
  executor: OperationExecutor;
  controller: ClaimController;
  windowObserver?: WindowObserver;
}

/** What `sidecar/<kind>/index.ts` exports as `createApplierKind`, with `O` its settings. */
export interface ApplierKindModule<O = unknown> {
  createApplierKind(deps: ApplierDeps<O>): ApplierKindParts;
}
