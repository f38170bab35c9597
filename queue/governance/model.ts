/**
 * Release governance's vocabulary, types only: what the cluster's objects say of change windows,
 * overrides and approvals (`TargetGovernance`), what a read of the foreign commits found
 * (`ForeignRead`, `SignatureRead`), and what a claim is shown (`ClaimGate`). The worker's decision
 * core and the sidecar's check at the write both speak it; it imports only `crds/`.
 */
import type { ChangeWindowKind, SignatureMode } from "../crds/governance.js";
import type { StatusReason } from "../crds/reasons.js";

export type { ChangeWindowKind, SignatureMode };

export interface ChangeWindowSpec {
  /**
   * The object that sets the window (`FluxClaim team/shop`, `GitTarget team/site`). Each object's
   * windows hold on their own, so one object never opens what another closes: an apply may start
   * only inside an allow window of every object that has allow windows, and inside no deny window.
   */
  from?: string;
  kind: ChangeWindowKind;
  /** Five-field cron (minute hour day-of-month month day-of-week), or six with seconds first. */
  schedule: string;
  /** Go-style duration: `90m`, `1h30m`, `45s`. */
  duration: string;
  /** IANA time zone the schedule is read in; default UTC. */
  timeZone?: string;
}

/** One entry of an AppProject's `spec.syncWindows`, as Argo CD stores it. */
export interface SyncWindowSpec {
  kind: string;
  schedule: string;
  duration: string;
  applications?: string[];
  namespaces?: string[];
  clusters?: string[];
  manualSync?: boolean;
  timeZone?: string;
  andOperator?: boolean;
}

/** What the listing reads of governance for one GitTarget and the claim it names. */
export interface TargetGovernance {
  /** The change windows in force: the claim's own (`spec.changeWindows`), else the GitTarget's. */
  changeWindows: ChangeWindowSpec[];
  /** The claim's override annotation, and who set it when managedFields say. */
  override?: { value: string; by?: string };
  /** The override the claim's status records as used (by the attempt `token`). */
  overrideUsed?: OverrideUse;
  /** Which approvals a foreign commit needs before it is applied (absent: none). */
  approval?: {
    sources: ApprovalSource[];
    /**
     * Why the approval settings cannot be judged together: two objects (the claim and a
     * GitTarget) set the same source differently. Nothing is applied until it is fixed: a claim
     * never weakens its GitTarget's rules, nor a GitTarget its claim's.
     */
    conflict?: string;
    /** Read from the GitProvider's commit-status API (where it is is the provider's to say). */
    commitStatus?: { context: string; api: "github" | "gitea" };
    signature?: SignatureSpec;
  };
  /** Post a commit status for each applied commit (the claim's `spec.commitStatusReport`). */
  statusReport?: { api: "github" | "gitea" };
  /**
   * Argo CD only: the sync windows of the Application's AppProject that belong to it
   * (`matchSyncWindows`), as the listing read them. Argo CD holds a sync they block.
   */
  syncWindows?: SyncWindowSpec[];
  /** Approvals given, by full commit SHA. */
  approved?: Record<string, Partial<Record<ApprovalSource, { by?: string; note?: string }>>>;
}

/** Whatever carries the governance of one GitTarget naming an applier (the core's TargetState). */
export interface Governed {
  governance?: TargetGovernance | undefined;
}

/**
 * Signature approval: each foreign commit is signed by a key of the Secret (in the namespace of
 * the object that sets it). `keys` is the digest of the Secret as the listing read it: a read of
 * the signatures against other keys is read again.
 */
export interface SignatureSpec {
  secret: { namespace: string; name: string };
  /**
   * HEAD: each foreign commit's own signature. Tag: a signed annotated tag at or above it on the
   * first-parent line (queue/governance/tag-approval.ts). TagAndHEAD: both.
   */
  mode: SignatureMode;
  /** In a tag mode, only tags whose name matches (`*`, `?`) are read. */
  tagPattern?: string;
  keys?: string;
}

/** Where an approval comes from. */
export const APPROVAL_SOURCES = ["Manual", "CommitStatus", "Signature"] as const;
export type ApprovalSource = (typeof APPROVAL_SOURCES)[number];

/** A commit let through, and by which approvals (for the attempt and the audit). */
export interface CommitApproval {
  commit: string;
  sources: ApprovalSource[];
  by?: string[];
  /**
   * The key that signed it, when a signature approves it (SSH `SHA256:…`, OpenPGP fingerprint):
   * in mode Tag the tag's key, in HEAD and TagAndHEAD the commit's own.
   */
  signedBy?: string;
  /** In a tag mode: the signed tag that approves it and the tag's key. */
  tag?: { name: string; signedBy: string };
}

/** Why a commit's signature does not approve it (a reason of queue/crds/reasons.ts, and words). */
export interface SignatureProblem {
  reason: string;
  message: string;
}

/** A commit that holds the apply, and what it lacks. */
export interface MissingApproval {
  commit: string;
  sources: ApprovalSource[];
  signature?: SignatureProblem;
  /**
   * The tip is not a descendant of this last applied commit: a rollback or a rewritten history is
   * applied only once an Approval names `commit` (whatever else approves it).
   */
  notDescendantOf?: string;
}

export type ApprovalGate =
  | { state: "NotRequired" }
  /** The approval settings cannot be judged (they conflict): nothing is applied until fixed. */
  | { state: "Invalid"; message: string }
  /** The foreign commits since the last applied commit are not read for this tip yet. */
  | { state: "Unread" }
  /** The read for this tip failed for this applier alone (ForeignRead.unreadable): held, and shown. */
  | { state: "Unreadable"; message: string }
  | { state: "Approved"; approvals: CommitApproval[] }
  | {
      state: "Awaiting";
      missing: MissingApproval[];
      approvals: CommitApproval[];
    };

export interface OverrideUse {
  value: string;
  token: string;
  by?: string;
}

/** The reasons of a claim's `ApplyAllowed`. */
export type ApplyAllowedReason =
  | typeof StatusReason.InsideChangeWindow
  | typeof StatusReason.OutsideChangeWindow
  | typeof StatusReason.InvalidChangeWindow
  | typeof StatusReason.ChangeWindowOverride
  | typeof StatusReason.AwaitingApproval
  | typeof StatusReason.ApprovalUnreadable
  | typeof StatusReason.InvalidApproval
  | typeof StatusReason.Approved
  | typeof StatusReason.BlockedBySyncWindow
  | typeof StatusReason.InsideSyncWindow;

/** What an applier's claim shows of governance; written when it changes. */
export interface ClaimGate {
  /** `ApplyAllowed`; null when no control is configured (the condition is left alone). */
  condition: { status: "True" | "False"; reason: ApplyAllowedReason; message: string } | null;
  changeWindow?: { open: boolean; nextOpening?: string; closesAt?: string };
  /** Argo CD: whether the project's sync windows would let a sync run now, and when that changes. */
  syncWindow?: { open: boolean; nextOpening?: string; closesAt?: string };
  /** Foreign commits waiting for approval, newest first, with the sources each lacks. */
  awaitingApproval?: {
    commit: string;
    missing: ApprovalSource[];
    signature?: SignatureProblem;
    notDescendantOf?: string;
  }[];
  overrideUsed?: OverrideUse | null;
}

/** Foreign commits (newest first) on the first-parent line from `tip` back to `since`. */
export interface ForeignRead {
  tip: string;
  since: string | null;
  commits: string[];
  /**
   * The tip is not a descendant of `since` (a force-push back to an older commit, a rewritten
   * history): `commits` is then only the newest foreign commit, which an Approval must name.
   */
  notDescendant?: boolean;
  /** The required commit status context's state per commit, when the claim asks for one. */
  statuses?: Record<string, string>;
  /** Each commit's signature checked against the trusted keys, when the claim asks for one. */
  signatures?: Record<string, SignatureRead>;
  /** The digest of the trusted keys the signatures were checked against (`approval.signature.keys`). */
  keys?: string;
  /**
   * Why this applier's approvals could not be read for this tip (a setting the worker cannot use,
   * a read that failed): the claim shows it, and it is read again at the next poll. Other
   * appliers' reads are not affected.
   */
  unreadable?: string;
}

/** A commit's signature as the shell checked it: by which key, or why it does not approve it. */
export type SignatureRead =
  | {
      ok: true;
      key: string;
      signer?: string;
      /** In a tag mode: the signed tag that approves it, and its key (`key` is the tag's in `Tag`). */
      tag?: { name: string; key: string; signer?: string };
    }
  | { ok: false; reason: string; message: string };
