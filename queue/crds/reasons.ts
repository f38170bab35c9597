/**
 * Every reason applygate writes: on a condition of our kinds' status, on the end of an attempt or
 * an operation, and on an Event. Product code names a reason only through this table, and each
 * one is described once, in docs/reasons.md (a test holds the two together).
 *
 * Not here: why an apply is due (ForeignCommit, Repair, Refusal, CatchUp), the contract's
 * `Reason` in queue/contract.ts, reasons copied from somebody else's status (a Kustomization's
 * Ready reason passed on as the operation's end), and `HTTP<status>`, a webhook endpoint's
 * non-2xx answer as the operation's end (one per status code, spelled where it is made).
 */
export const StatusReason = {
  // GitProvider: Ready (the gateway's view of its webhook secret)
  WebhookReady: "WebhookReady",
  SecretPending: "SecretPending",
  SecretKeyMissing: "SecretKeyMissing",

  // GitProvider and GitTarget: a Secret that could not be read
  SecretForbidden: "SecretForbidden",
  SecretNotFound: "SecretNotFound",
  SecretUnreadable: "SecretUnreadable",
  // GitProvider: credentials that would go somewhere other than its own host, or over plain http
  InsecureTransport: "InsecureTransport",
  CredentialHostRefused: "CredentialHostRefused",

  // GitTarget: Accepted, CredentialsAvailable, Ready, Reconciling, Stalled, WriteRefused
  Accepted: "Accepted",
  ProviderNamespaceNotAllowed: "ProviderNamespaceNotAllowed",
  RepositoryHeld: "RepositoryHeld",
  FolderHeld: "FolderHeld",
  SecretRead: "SecretRead",
  Published: "Published",
  PublicationRetrying: "PublicationRetrying",
  BaseBranchMissing: "BaseBranchMissing",
  IntakePaused: "IntakePaused",

  // A refused write (GitTarget WriteRefused and the WriteRefused Event)
  WriteRefused: "WriteRefused",
  Unstorable: "Unstorable",
  UnknownTarget: "UnknownTarget",
  CommitFailed: "CommitFailed",
  KindNotAllowed: "KindNotAllowed",
  ForeignNamespace: "ForeignNamespace",
  PrivilegedKind: "PrivilegedKind",
  ClusterScoped: "ClusterScoped",
  /** A Secret, never written to Git in clear text (the watch plane's refusal notices say it too). */
  SecretRefused: "SecretRefused",
  /** A Pod template beyond the Pod Security level of its namespace (refused at the door). */
  PodSecurity: "PodSecurity",

  // Claim: Ready, Configured, InControl
  Bound: "Bound",
  NotReferenced: "NotReferenced",
  NotBound: "NotBound",
  NotConfigured: "NotConfigured",
  HeldByAnotherClaim: "HeldByAnotherClaim",
  Releasing: "Releasing",
  ApplierNamespaceNotAllowed: "ApplierNamespaceNotAllowed",
  TargetDeleting: "TargetDeleting",
  CrossNamespaceNotAllowed: "CrossNamespaceNotAllowed",
  ProviderNotFound: "ProviderNotFound",
  ProviderNotAdmitted: "ProviderNotAdmitted",
  SourceUnknown: "SourceUnknown",
  SourceMismatch: "SourceMismatch",
  UnsupportedSource: "UnsupportedSource",
  SourceNotABranch: "SourceNotABranch",
  KustomizationNotFound: "KustomizationNotFound",
  ApplicationNotFound: "ApplicationNotFound",
  VersionCheckFailed: "VersionCheckFailed",
  ArgoCDVersionNotSupported: "ArgoCDVersionNotSupported",
  AutomatedSyncOwnedElsewhere: "AutomatedSyncOwnedElsewhere",
  OwnedByApplicationSet: "OwnedByApplicationSet",
  SuspendOwnedElsewhere: "SuspendOwnedElsewhere",
  Suspended: "Suspended",
  AutomatedSyncOff: "AutomatedSyncOff",
  Applying: "Applying",
  Suspending: "Suspending",

  // WebhookClaim: Configured, InControl, Ready
  InvalidSpec: "InvalidSpec",
  URLRefused: "URLRefused",
  EndpointHeld: "EndpointHeld",
  EndpointReady: "EndpointReady",

  // Claim: ApplyAllowed (release governance: change windows, approvals)
  InsideChangeWindow: "InsideChangeWindow",
  OutsideChangeWindow: "OutsideChangeWindow",
  InvalidChangeWindow: "InvalidChangeWindow",
  ChangeWindowOverride: "ChangeWindowOverride",
  AwaitingApproval: "AwaitingApproval",
  ApprovalUnreadable: "ApprovalUnreadable",
  /** The claim and a GitTarget (or two GitTargets) set an approval source differently. */
  InvalidApproval: "InvalidApproval",
  Approved: "Approved",
  // Why a signature does not approve a commit (status.governance.awaitingApproval[].signature)
  CommitUnsigned: "CommitUnsigned",
  SignatureUntrusted: "SignatureUntrusted",
  SignatureInvalid: "SignatureInvalid",
  SignatureUnsupported: "SignatureUnsupported",
  NoTrustedKeys: "NoTrustedKeys",
  CommitNotTagged: "CommitNotTagged",
  BlockedBySyncWindow: "BlockedBySyncWindow",
  InsideSyncWindow: "InsideSyncWindow",
  /** What a reason the API server would refuse (not CamelCase) is written as. */
  Unknown: "Unknown",

  // The end of an attempt that started nothing (RequestFailed, Rejected, Dropped, Stale)
  Stale: "Stale",
  EditedAfterFlush: "EditedAfterFlush",
  ClaimNotFound: "ClaimNotFound",
  ClaimDeleting: "ClaimDeleting",
  OperationInFlight: "OperationInFlight",
  ApplierMismatch: "ApplierMismatch",
  NotInControl: "NotInControl",
  NoTargetStands: "NoTargetStands",
  QueueUnavailable: "QueueUnavailable",
  NotHeld: "NotHeld",
  SidecarStopping: "SidecarStopping",
  NotSent: "NotSent",
  TerminateForbidden: "TerminateForbidden",
  OperationInProgress: "OperationInProgress",
  Forbidden: "Forbidden",
  UpdateRefused: "UpdateRefused",
  SourceSuspended: "SourceSuspended",
  SourceNotFound: "SourceNotFound",
  SourceNotFetched: "SourceNotFetched",
  SourceRequestFailed: "SourceRequestFailed",
  ArtifactMismatch: "ArtifactMismatch",
  ArtifactMoved: "ArtifactMoved",
  KustomizationReplaced: "KustomizationReplaced",
  KustomizationDeleting: "KustomizationDeleting",
  SourceChanged: "SourceChanged",
  ResumeConflict: "ResumeConflict",
  ResumeRefused: "ResumeRefused",
  SidecarLost: "SidecarLost",
  AttemptLost: "AttemptLost",
  NotApproved: "NotApproved",
  ResolveFailed: "ResolveFailed",
  AddressRefused: "AddressRefused",
  ConnectFailed: "ConnectFailed",
  ConnectTimeout: "ConnectTimeout",

  // An operation's phase and end (Running, Unresolved, Succeeded, Failed)
  SyncWindow: "SyncWindow",
  Retrying: "Retrying",
  OperationUnresolved: "OperationUnresolved",
  OperationUnfollowed: "OperationUnfollowed",
  ClaimGone: "ClaimGone",
  NotResumed: "NotResumed",
  NotReconciled: "NotReconciled",
  NotReady: "NotReady",
  RevisionNotApplied: "RevisionNotApplied",
  ReconciliationFailed: "ReconciliationFailed",
  RevisionMismatch: "RevisionMismatch",
  Applied: "Applied",
  ApplicationDeleted: "ApplicationDeleted",
  UpdateLost: "UpdateLost",
  OperationRemoved: "OperationRemoved",
  ClaimReleased: "ClaimReleased",
  AnswerLost: "AnswerLost",
  Timeout: "Timeout",
  ToolReportedFailed: "ToolReportedFailed",
  /** Ended by a newer tip that superseded its commit (the phase of that name, and its outcome). */
  Superseded: "Superseded",

  // A claim's Retrying condition (written by the branch worker)
  BackingOff: "BackingOff",
  ApplierRetrying: "ApplierRetrying",
  NoRetryPending: "NoRetryPending",

  // WatchRule: Ready, KindsResolved
  TargetNotFound: "TargetNotFound",
  Watching: "Watching",
  KindsNotResolved: "KindsNotResolved",
  Resolved: "Resolved",
  KindNotServed: "KindNotServed",
  KindForbidden: "KindForbidden",

  // Events about claims and appliers
  Adopted: "Adopted",
  ClaimedResourceReconciled: "ClaimedResourceReconciled",
  Released: "Released",
  HandedOver: "HandedOver",
  ReleaseFailed: "ReleaseFailed",
  StaleOperationTerminated: "StaleOperationTerminated",
  OperationSucceeded: "OperationSucceeded",
  OperationFailed: "OperationFailed",
  OperationSuperseded: "OperationSuperseded",
} as const;

export type StatusReason = (typeof StatusReason)[keyof typeof StatusReason];
