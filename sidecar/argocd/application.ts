/**
 * What the Argo CD applier reads of an Application (Argo CD 3.5 shapes, pure): the automated-sync
 * switch as Argo CD itself decides it, who owns that switch, the source, and where our token sits.
 * No I/O here; the executor and the claim controller feed these functions what they read.
 */
import { FIELD_MANAGER } from "../../queue/contract.js";
import type { ArgoCDPreviousSuspendState } from "../../queue/crds/index.js";
import { StatusReason } from "../../queue/crds/reasons.js";
import {
  type ArgoOperationView,
  type applicationAutomatedOf,
  applicationOperationOf,
  applicationSourceFields,
  applicationSpecFields,
  fieldAppliers,
  fieldOf,
  type KObject,
  type OperationStateView,
  operationStateOf,
  partOf,
  RESOURCES,
  type ResourceType,
} from "../../queue/kube/index.js";

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
// Shapes: an Application is a KObject, read through the readers of queue/kube/readers.ts; the
// operation is also what we write, so its shape is ours.

export type RetryStrategy = {
  limit?: number;
  backoff?: { duration?: string; factor?: number; maxDuration?: string };
  refresh?: boolean;
};

export type SyncOperation = {
  revision?: string;
  prune?: boolean;
  syncOptions?: string[];
  source?: Record<string, unknown>;
};

/** An operation as we write it (`buildSyncOperation`). */
export type ArgoOperation = {
  sync?: SyncOperation;
  initiatedBy?: { username?: string; automated?: boolean };
  info?: { name: string; value: string }[];
  retry?: Record<string, unknown>;
};

export type ArgoPhase = "Running" | "Terminating" | "Failed" | "Error" | "Succeeded";

/** `spec.syncPolicy.automated` as read (`applicationAutomatedOf`). */
export type Automated = NonNullable<ReturnType<typeof applicationAutomatedOf>>;

// ---------------------------------------------------------------------------------------------
// The switch

/** Argo CD's IsAutomatedSyncEnabled: the block is present and `enabled` is unset or true. */
export function isAutomatedSyncEnabled(automated: Automated | null | undefined): boolean {
  return !!automated && (automated.enabled === undefined || automated.enabled === null || automated.enabled);
}

/** How the switch stands, in the words of status.previousSuspendState. */
export function switchState(automated: Automated | null | undefined): ArgoCDPreviousSuspendState {
  if (!automated) return "NoAutomated";
  return isAutomatedSyncEnabled(automated) ? "AutomatedOn" : "AutomatedOff";
}

/** Whether automated sync runs in that state. */
export const stateIsOn = (s: ArgoCDPreviousSuspendState): boolean => s === "AutomatedOn";

/** The ApplicationSet that generated the Application: its controller ownerReference. */
export function owningApplicationSet(app: KObject): string | undefined {
  const owner = app.metadata.ownerReferences?.find(
    (o) => o.controller === true && o.kind === "ApplicationSet" && o.apiVersion.startsWith("argoproj.io/"),
  );
  return owner?.name;
}

/** Argo CD's switch, as managedFields name it. */
const ENABLED = ["spec", "syncPolicy", "automated", "enabled"];

/**
 * Managers other than us that apply (server-side, operation Apply) the switch. Their next apply
 * takes it back, so we must not write it. An Update entry wrote it once and is no owner we fight.
 */
export function otherSwitchAppliers(app: KObject): string[] {
  return fieldAppliers(app, ENABLED)
    .filter((m) => m !== FIELD_MANAGER)
    .map((m) => m ?? "(unnamed)");
}

/** Whether our own server-side apply holds the switch. */
export function weHoldSwitch(app: KObject): boolean {
  return fieldAppliers(app, ENABLED).includes(FIELD_MANAGER);
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
export function sourceOf(app: KObject): SourceView {
  const unsupported = (message: string): SourceView => ({
    state: "Unsupported",
    reason: StatusReason.UnsupportedSource,
    message,
  });
  const sources = partOf(applicationSpecFields, app.spec, "sources");
  if (Array.isArray(sources) && sources.length > 0)
    return unsupported("multi-source Applications are not supported");
  if (partOf(applicationSpecFields, app.spec, "sourceHydrator"))
    return unsupported("Applications with a source hydrator are not supported");
  const src = partOf(applicationSpecFields, app.spec, "source");
  const repoURL = fieldOf(applicationSourceFields, src, "repoURL");
  if (!repoURL) return unsupported("the Application has no spec.source.repoURL");
  const rev = (fieldOf(applicationSourceFields, src, "targetRevision") ?? "")
    .trim()
    .replace(/^refs\/heads\//, "");
  if (rev === "" || rev === "HEAD") {
    return unsupported("spec.source.targetRevision must name the branch (HEAD follows the default branch)");
  }
  if (SHA_LIKE.test(rev) || rev.startsWith("refs/")) {
    return unsupported(`spec.source.targetRevision ${rev} is no branch`);
  }
  return { state: "Known", url: repoURL, branch: rev };
}

// ---------------------------------------------------------------------------------------------
// Tokens

/** Our token in an operation's info, if the operation is one of ours. */
export function tokenOf(
  op:
    | (Pick<ArgoOperationView, "initiatedBy"> & { info?: readonly { name: string; value: string }[] })
    | undefined,
): string | undefined {
  if (!op || op.initiatedBy?.username !== INITIATOR) return undefined;
  return op.info?.find((i) => i.name === TOKEN_INFO)?.value;
}

export const operationOf = (app: KObject): ArgoOperationView | undefined => applicationOperationOf(app);
export const stateOf = (app: KObject): OperationStateView | undefined => operationStateOf(app);

/** Completed as Argo CD's OperationPhase.Completed() says: Succeeded, Failed or Error. */
export const isCompletedPhase = (phase: string | undefined): boolean =>
  phase === "Succeeded" || phase === "Failed" || phase === "Error";

/** The Argo CD instance name of the Application, as its tracking annotation starts. */
export function appInstance(app: { namespace: string; name: string }, controlNamespace: string): string {
  return app.namespace === controlNamespace ? app.name : `${app.namespace}_${app.name}`;
}
