/** Shapes argosim reads and writes: the parts of Argo CD's Application types it reproduces. */

export interface SyncOptionsSource {
  repoURL: string;
  path?: string;
  targetRevision?: string;
  directory?: { recurse?: boolean };
}

export interface RetryStrategy {
  /** 0: no retry; negative: unlimited. */
  limit?: number;
  refresh?: boolean;
  backoff?: { duration?: string; factor?: number; maxDuration?: string };
}

export interface SyncOperation {
  revision?: string;
  revisions?: string[];
  prune?: boolean;
  dryRun?: boolean;
  syncOptions?: string[];
  source?: SyncOptionsSource;
  resources?: { group?: string; kind: string; name: string; namespace?: string }[];
  /** Go field SelfHealAttemptsCount; its JSON name is autoHealAttemptsCount. */
  autoHealAttemptsCount?: number;
  [k: string]: unknown;
}

export interface InitiatedBy {
  username?: string;
  automated?: boolean;
}

export interface InfoEntry {
  name: string;
  value: string;
}

export interface Operation {
  sync?: SyncOperation;
  initiatedBy?: InitiatedBy;
  info?: InfoEntry[];
  retry?: RetryStrategy;
}

export type OperationPhase = "Running" | "Terminating" | "Failed" | "Error" | "Succeeded";

export interface ResourceResult {
  group: string;
  version: string;
  kind: string;
  namespace: string;
  name: string;
  status: "Synced" | "SyncFailed" | "Pruned" | "PruneSkipped";
  message: string;
  hookType?: string;
  hookPhase?: string;
  syncPhase: "PreSync" | "Sync" | "PostSync";
}

export interface SyncResult {
  revision?: string;
  source?: SyncOptionsSource;
  resources?: ResourceResult[];
}

export interface OperationState {
  operation: Operation;
  phase: OperationPhase;
  message?: string;
  syncResult?: SyncResult;
  startedAt: string;
  finishedAt?: string;
  retryCount?: number;
}

export interface SyncWindow {
  kind?: string;
  schedule?: string;
  duration?: string;
  applications?: string[];
  namespaces?: string[];
  clusters?: string[];
  manualSync?: boolean;
  andOperator?: boolean;
  timeZone?: string;
}

export interface Application {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace: string;
    uid?: string;
    resourceVersion?: string;
    generation?: number;
    annotations?: Record<string, string>;
    labels?: Record<string, string>;
    ownerReferences?: unknown[];
    deletionTimestamp?: string;
  };
  spec: {
    project?: string;
    destination?: { server?: string; namespace?: string; name?: string };
    source?: SyncOptionsSource;
    syncPolicy?: {
      automated?: { enabled?: boolean; prune?: boolean; selfHeal?: boolean; allowEmpty?: boolean };
      syncOptions?: string[];
      retry?: RetryStrategy;
    };
  };
  operation?: Operation | null;
  status?: {
    sync?: { status?: string; revision?: string; comparedTo?: unknown };
    health?: { status?: string };
    operationState?: OperationState | null;
    reconciledAt?: string;
    history?: unknown[];
    [k: string]: unknown;
  };
}

/** A Kubernetes object as read from Git or the cluster. */
export interface KObj {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    annotations?: Record<string, string>;
    labels?: Record<string, string>;
    [k: string]: unknown;
  };
  [k: string]: unknown;
}

export interface AppRef {
  namespace: string;
  name: string;
}

export const appKey = (a: AppRef): string => `${a.namespace}/${a.name}`;
