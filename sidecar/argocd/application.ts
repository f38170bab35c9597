/**
 * What the Argo CD applier reads of an Application (Argo CD 3.5 shapes, pure): the automated-sync
 * switch as Argo CD itself decides it, who owns that switch, the source, and where our token sits.
 * No I/O here; the executor and the claim controller feed these functions what they read.
 */
import { FIELD_MANAGER } from "../../queue/contract.js";
import type { ArgoCDPreviousSuspendState } from "../../queue/crds/index.js";
import { StatusReason } from "../../queue/crds/reasons.js";
import { type KObject, RESOURCES, type ResourceType } from "../../queue/kube/index.js";

export const APPLICATION: ResourceType = RESOURCES.application;
export const APPLICATION_SET: ResourceType = RESOURCES.applicationSet;
export const APPLICATION_API_VERSION = "argoproj.io/v1alpha1";

/** The `info` entry of an operation that carries our token: how we find our sync again. */
export const TOKEN_INFO = "applygate.dev/operation-token";
/** The `info` entry that names why the branch worker asked (shown in the Argo CD UI). */
export const REASON_INFO = "applygate.dev/reason";
/** Our initiator: Argo CD shows it as "Initiated by: applygate (automated)". */
export const INITIATOR = "applygate";
/** Asks the controller for a normal refresh (compare only); it removes the annotation after. */
export const REFRESH_ANNOTATION = "argocd.argoproj.io/refresh";
export const TRACKING_ANNOTATION = "argocd.argoproj.io/tracking-id";

// ---------------------------------------------------------------------------------------------
// Shapes (only what we read or write)

export interface RetryStrategy {
  limit?: number;
  backoff?: { duration?: string; factor?: number; maxDuration?: string };
  refresh?: boolean;
}

export interface AppSource {
  repoURL?: string;
  path?: string;
  targetRevision?: string;
  [k: string]: unknown;
}

export interface SyncOperation {
  revision?: string;
  revisions?: string[];
  prune?: boolean;
  syncOptions?: string[];
  source?: AppSource;
  [k: string]: unknown;
}

export interface ArgoOperation {
  sync?: SyncOperation;
  initiatedBy?: { username?: string; automated?: boolean };
  info?: { name: string; value: string }[];
  retry?: RetryStrategy;
  [k: string]: unknown;
}

export type ArgoPhase = "Running" | "Terminating" | "Failed" | "Error" | "Succeeded";

export interface OperationState {
  operation?: ArgoOperation;
  phase?: ArgoPhase | string;
  message?: string;
  syncResult?: { revision?: string; [k: string]: unknown };
  startedAt?: string;
  finishedAt?: string;
  retryCount?: number;
}

export interface Automated {
  enabled?: boolean | null;
  prune?: boolean;
  selfHeal?: boolean;
  allowEmpty?: boolean;
}

export interface ApplicationSpec {
  project?: string;
  source?: AppSource;
  sources?: AppSource[];
  sourceHydrator?: unknown;
  destination?: { server?: string; namespace?: string; name?: string };
  syncPolicy?: { automated?: Automated | null; syncOptions?: string[]; retry?: RetryStrategy };
}

export interface ManagedFieldsEntry {
  manager?: string;
  operation?: string;
  apiVersion?: string;
  time?: string;
  fieldsType?: string;
  fieldsV1?: Record<string, unknown>;
  subresource?: string;
}

export interface Application extends KObject {
  spec?: ApplicationSpec;
  operation?: ArgoOperation | null;
  status?: { operationState?: OperationState | null; [k: string]: unknown };
}

// ---------------------------------------------------------------------------------------------
// The switch

/** Argo CD's IsAutomatedSyncEnabled: the block is present and `enabled` is unset or true. */
export function isAutomatedSyncEnabled(automated: Automated | null | undefined): boolean {
  return !!automated && (automated.enabled === undefined || automated.enabled === null || automated.enabled);
}

export function automatedOf(app: Application): Automated | undefined {
  return app.spec?.syncPolicy?.automated ?? undefined;
}

/** How the switch stands, in the words of status.previousSuspendState. */
export function switchState(automated: Automated | null | undefined): ArgoCDPreviousSuspendState {
  if (!automated) return "NoAutomated";
  return isAutomatedSyncEnabled(automated) ? "AutomatedOn" : "AutomatedOff";
}

/** Whether automated sync runs in that state. */
export const stateIsOn = (s: ArgoCDPreviousSuspendState): boolean => s === "AutomatedOn";

/** An ApplicationSet, as far as the claim reads it: its template's switch. */
export interface ApplicationSet extends KObject {
  spec?: { template?: { spec?: { syncPolicy?: { automated?: Automated } } } };
}

/** The ApplicationSet that generated the Application: its controller ownerReference. */
export function owningApplicationSet(app: Application): string | undefined {
  const owner = app.metadata.ownerReferences?.find(
    (o) => o.controller === true && o.kind === "ApplicationSet" && o.apiVersion.startsWith("argoproj.io/"),
  );
  return owner?.name;
}

function ownsEnabled(entry: ManagedFieldsEntry): boolean {
  const spec = entry.fieldsV1?.["f:spec"] as Record<string, unknown> | undefined;
  const policy = spec?.["f:syncPolicy"] as Record<string, unknown> | undefined;
  const automated = policy?.["f:automated"] as Record<string, unknown> | undefined;
  return automated !== undefined && "f:enabled" in automated;
}

/**
 * Managers other than us that apply (server-side, operation Apply) the switch. Their next apply
 * takes it back, so we must not write it. An Update entry wrote it once and is no owner we fight.
 */
export function otherSwitchAppliers(app: Application): string[] {
  const entries = (app.metadata.managedFields ?? []) as ManagedFieldsEntry[];
  return entries
    .filter((e) => e.operation === "Apply" && e.manager !== FIELD_MANAGER && !e.subresource && ownsEnabled(e))
    .map((e) => e.manager ?? "(unnamed)");
}

/** Whether our own server-side apply holds the switch. */
export function weHoldSwitch(app: Application): boolean {
  const entries = (app.metadata.managedFields ?? []) as ManagedFieldsEntry[];
  return entries.some((e) => e.operation === "Apply" && e.manager === FIELD_MANAGER && ownsEnabled(e));
}

/** The server-side apply body that owns `enabled` (and nothing else of `automated`). */
export function switchApply(
  app: { metadata: { name: string; namespace?: string } },
  enabled: boolean,
): KObject {
  return {
    apiVersion: APPLICATION_API_VERSION,
    kind: "Application",
    metadata: { name: app.metadata.name, namespace: app.metadata.namespace },
    spec: { syncPolicy: { automated: { enabled } } },
  };
}

/** An apply of nothing: gives up every field our apply owned. */
export function releaseApply(app: { metadata: { name: string; namespace?: string } }): KObject {
  return {
    apiVersion: APPLICATION_API_VERSION,
    kind: "Application",
    metadata: { name: app.metadata.name, namespace: app.metadata.namespace },
  };
}

// ---------------------------------------------------------------------------------------------
// The source

export type SourceView =
  | { state: "Known"; url: string; branch: string }
  | { state: "Unsupported"; reason: typeof StatusReason.UnsupportedSource; message: string };

const SHA_LIKE = /^[0-9a-f]{7,40}$/;

/**
 * The repository and branch the Application fetches. Multi-source, a source hydrator, and a
 * source that follows no branch (HEAD, a tag or a commit) are out of scope: every sync we start is
 * pinned to a branch commit the branch worker checked, and the compare must follow that branch.
 */
export function sourceOf(app: Application): SourceView {
  const spec = app.spec ?? {};
  const unsupported = (message: string): SourceView => ({
    state: "Unsupported",
    reason: StatusReason.UnsupportedSource,
    message,
  });
  if (spec.sources && spec.sources.length > 0)
    return unsupported("multi-source Applications are not supported");
  if (spec.sourceHydrator) return unsupported("Applications with a source hydrator are not supported");
  const src = spec.source;
  if (!src?.repoURL) return unsupported("the Application has no spec.source.repoURL");
  const rev = (src.targetRevision ?? "").trim().replace(/^refs\/heads\//, "");
  if (rev === "" || rev === "HEAD") {
    return unsupported("spec.source.targetRevision must name the branch (HEAD follows the default branch)");
  }
  if (SHA_LIKE.test(rev) || rev.startsWith("refs/")) {
    return unsupported(`spec.source.targetRevision ${rev} is no branch`);
  }
  return { state: "Known", url: src.repoURL, branch: rev };
}

// ---------------------------------------------------------------------------------------------
// Tokens

/** Our token in an operation's info, if the operation is one of ours. */
export function tokenOf(op: ArgoOperation | null | undefined): string | undefined {
  if (!op || op.initiatedBy?.username !== INITIATOR) return undefined;
  return op.info?.find((i) => i.name === TOKEN_INFO)?.value;
}

export const operationOf = (app: Application): ArgoOperation | undefined => app.operation ?? undefined;
export const stateOf = (app: Application): OperationState | undefined =>
  app.status?.operationState ?? undefined;

/** Completed as Argo CD's OperationPhase.Completed() says: Succeeded, Failed or Error. */
export const isCompletedPhase = (phase: string | undefined): boolean =>
  phase === "Succeeded" || phase === "Failed" || phase === "Error";

/** The Argo CD instance name of the Application, as its tracking annotation starts. */
export function appInstance(app: { namespace: string; name: string }, controlNamespace: string): string {
  return app.namespace === controlNamespace ? app.name : `${app.namespace}_${app.name}`;
}
