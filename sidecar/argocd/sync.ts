/**
 * One sync, as pure decisions: the operation automated sync would build (pinned to the checked
 * commit and carrying our token), the update that starts it, and what the Application's own
 * fields say about it afterwards. Argo CD 3.5: `operation` is set only while none is, the same
 * update clears status.operationState, the controller copies the operation (info included) into
 * status.operationState, and clears `operation` once the operation completed.
 */

import { parseGoDuration } from "../../queue/go-duration.js";
import {
  applicationAutomatedOf,
  applicationSpecFields,
  fieldOf,
  isRecord,
  type KObject,
  type OperationStateView,
  partOf,
  stringsIn,
  syncPolicyFields,
} from "../../queue/kube/index.js";
import {
  type ArgoOperation,
  INITIATOR,
  isCompletedPhase,
  operationOf,
  REASON_INFO,
  REFRESH_ANNOTATION,
  type RetryStrategy,
  stateOf,
  TOKEN_INFO,
  tokenOf,
} from "./application.js";

/** Argo CD's message on an operation a sync window holds back (syncWindowPreventsSync). */
export const SYNC_WINDOW_MESSAGE = "Sync operation blocked by sync window";
/** Argo CD's default retry when the sync policy names none (autoSync). */
export const DEFAULT_RETRY: RetryStrategy = { limit: 5 };

export interface SyncRequest {
  commit: string;
  token: string;
  /** Why the branch worker asked (ForeignCommit, Repair, …), shown in Argo CD's operation info. */
  reasons?: readonly string[];
}

/**
 * The operation automated sync would start, with the revision pinned to the checked commit. The
 * retry is the policy's, without `refresh`, which would drop the revision on a retry and sync the
 * newest commit instead.
 */
export function buildSyncOperation(app: KObject, req: SyncRequest): ArgoOperation {
  const policy = fieldOf(applicationSpecFields, app.spec, "syncPolicy");
  const automated = applicationAutomatedOf(app);
  // The policy's retry and the source are handed on to Argo CD as stored: Argo CD reads them.
  const retry = structuredClone(fieldOf(syncPolicyFields, policy, "retry") ?? DEFAULT_RETRY);
  delete retry.refresh;
  const syncOptions = stringsIn(fieldOf(syncPolicyFields, policy, "syncOptions"));
  const source = partOf(applicationSpecFields, app.spec, "source");
  const reasons = [...new Set(req.reasons ?? [])];
  return {
    sync: {
      revision: req.commit,
      prune: automated?.prune === true,
      ...(syncOptions.length ? { syncOptions } : {}),
      ...(isRecord(source) ? { source: structuredClone(source) } : {}),
    },
    initiatedBy: { username: INITIATOR, automated: true },
    info: [
      { name: TOKEN_INFO, value: req.token },
      ...(reasons.length ? [{ name: REASON_INFO, value: reasons.join(",") }] : []),
    ],
    retry,
  };
}

/**
 * The whole Application with `operation` set and status.operationState cleared, as read (its
 * resourceVersion included, so the update lands only on exactly what was judged).
 */
export function startSyncUpdate(app: KObject, op: ArgoOperation): KObject {
  const next = structuredClone(app);
  next.operation = op;
  if (isRecord(next.status)) {
    delete next.status.operationState;
  }
  return next;
}

/** The write that makes an update made from `resourceVersion` impossible: a refresh request at it. */
export function refreshPatch(): Record<string, unknown> {
  return { metadata: { annotations: { [REFRESH_ANNOTATION]: "normal" } } };
}

// ---------------------------------------------------------------------------------------------
// Before the update: is another operation in the way?

export type Busy = { busy: false } | { busy: true; token?: string; phase?: string; message: string };

/**
 * Another operation is set: never replaced, waited out. A stuck state with no operation (somebody
 * removed `operation` mid-run) is no operation in progress; a sync goes over it.
 */
export function busyWith(app: KObject): Busy {
  const op = operationOf(app);
  if (!op) return { busy: false };
  const state = stateOf(app);
  const token = tokenOf(op);
  const who = token
    ? `applygate operation ${token}`
    : op.initiatedBy?.automated
      ? "an automated sync"
      : `a sync by ${op.initiatedBy?.username ?? "somebody"}`;
  const revision = op.sync?.revision ? ` of ${op.sync.revision}` : "";
  const phase = state?.phase;
  return {
    busy: true,
    ...(token ? { token } : {}),
    ...(phase ? { phase } : {}),
    message: `another operation is in progress: ${who}${revision}${phase ? ` (${phase})` : ""}`,
  };
}

// ---------------------------------------------------------------------------------------------
// After the update: where does our operation stand?

export type SyncProgress =
  /** Neither `operation` nor the operation state carries the token. */
  | { stage: "Absent" }
  /** `operation` carries it; the controller has not started it yet. */
  | { stage: "Pending" }
  /** The operation state carries it and it has not completed (a pending retry is still running). */
  | {
      stage: "Running";
      startedAt?: string;
      message?: string;
      /** Held back by a sync window: it runs later, still pinned. */
      blockedByWindow: boolean;
      retrying: boolean;
      terminating: boolean;
      /** While it waits for Argo CD's own retry: the attempt that comes next, of how many, and when. */
      retry?: PendingRetry;
    }
  /** Running, but `operation` was removed: the controller will never finish it. */
  | { stage: "Orphaned"; message?: string }
  /** The operation state carrying it completed and `operation` is cleared. */
  | { stage: "Completed"; phase: "Succeeded" | "Failed" | "Error"; message?: string; revision?: string };

export function syncProgress(app: KObject, token: string): SyncProgress {
  const op = operationOf(app);
  const state = stateOf(app);
  const inOperation = tokenOf(op) === token;
  const inState = state !== undefined && tokenOf(state.operation) === token;
  if (!inState) return inOperation ? { stage: "Pending" } : { stage: "Absent" };
  const message = state.message;
  if (isCompletedPhase(state.phase)) {
    // The controller clears `operation` in the same write; until then it is still finishing.
    if (inOperation) return running(state, message);
    const revision = state.syncResult?.revision ?? state.operation?.sync?.revision;
    return {
      stage: "Completed",
      phase: state.phase as "Succeeded" | "Failed" | "Error",
      ...(message !== undefined ? { message } : {}),
      ...(revision ? { revision } : {}),
    };
  }
  if (!inOperation) return { stage: "Orphaned", ...(message !== undefined ? { message } : {}) };
  return running(state, message);
}

function running(
  state: NonNullable<ReturnType<typeof stateOf>>,
  message: string | undefined,
): Extract<SyncProgress, { stage: "Running" }> {
  const retry = pendingRetry(state);
  return {
    stage: "Running",
    ...(state.startedAt ? { startedAt: state.startedAt } : {}),
    ...(message !== undefined ? { message } : {}),
    blockedByWindow: message?.startsWith(SYNC_WINDOW_MESSAGE) === true,
    retrying: state.phase === "Running" && !!state.finishedAt,
    terminating: state.phase === "Terminating",
    ...(retry ? { retry } : {}),
  };
}

/** Argo CD's retry defaults (RetryStrategy.NextRetryAt): 5 s, doubling, at most 3 min. */
export const ARGO_RETRY_DEFAULTS = { durationMs: 5_000, factor: 2, maxDurationMs: 180_000 } as const;

export interface PendingRetry {
  /** The attempt that comes next, counting the first sync (Argo CD's retryCount + 1). */
  attempt: number;
  /** How many attempts the operation makes at most (its retry limit + 1); absent: no limit. */
  of?: number;
  /** When the controller starts it (RFC 3339). */
  at: string;
}

/**
 * The retry a failed attempt waits for: a Running operation state with a finishedAt. Argo CD
 * starts it at finishedAt + duration × factor^retryCount (capped at maxDuration), retryCount being
 * the count after the failure (processRequestedAppOperation asks NextRetryAt with it), so the
 * waits are 10 s, 20 s, 40 s … by default, not the 5 s … its message's time names.
 */
export function pendingRetry(state: OperationStateView): PendingRetry | undefined {
  if (state.phase !== "Running" || !state.finishedAt) return undefined;
  const finished = Date.parse(state.finishedAt);
  if (!Number.isFinite(finished)) return undefined;
  const count = state.retryCount ?? 0;
  const retry = state.operation?.retry;
  const b = retry?.backoff;
  const duration = parseGoDuration(b?.duration, { bareSeconds: true }) ?? ARGO_RETRY_DEFAULTS.durationMs;
  const factor = b?.factor ?? ARGO_RETRY_DEFAULTS.factor;
  const max = parseGoDuration(b?.maxDuration, { bareSeconds: true }) ?? ARGO_RETRY_DEFAULTS.maxDurationMs;
  let wait = duration * factor ** count;
  if (max > 0) wait = Math.min(wait, max);
  const limit = retry?.limit ?? 0;
  return {
    attempt: count + 1,
    ...(limit >= 0 ? { of: limit + 1 } : {}),
    at: new Date(finished + wait).toISOString(),
  };
}
