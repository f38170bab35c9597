/**
 * The operation lifecycle of processRequestedAppOperation / setOperationState (Argo CD 3.5), as
 * pure steps over OperationState. The controller writes each result with a JSON merge patch, so
 * fields a step leaves out survive from the stored state, as in the released controller.
 */
import { wireTime } from "../clock.js";
import { hasRetriesLeft, kitchen, nextRetryAt } from "./retry.js";
import type { Operation, OperationState } from "./types.js";

export const completed = (phase: string | undefined): boolean =>
  phase === "Succeeded" || phase === "Failed" || phase === "Error";

/**
 * A value as Go's encoding/json writes a field tagged omitempty: false, 0, "", null and empty
 * lists are left out. An object stays, empty or not: in these types it is a struct or a non-nil
 * pointer, which omitempty keeps (`sync: {}` from an empty SyncOperation).
 */
function goOmitEmpty(v: unknown): unknown {
  if (Array.isArray(v)) return v.length === 0 ? undefined : v.map((x) => goOmitEmpty(x) ?? x);
  if (v && typeof v === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) {
      const kept = goOmitEmpty(x);
      if (kept !== undefined) out[k] = kept;
    }
    return out;
  }
  return v === false || v === 0 || v === "" || v === null ? undefined : v;
}

/**
 * The operation as the controller's Go types write it back: every field but info's is omitempty
 * (a `prune: false` is dropped), while initiatedBy and retry are structs, not pointers, so they are
 * written even when empty (`retry: {}`).
 */
export function asWrittenByArgo(op: Operation): Operation {
  const { info, ...rest } = structuredClone(op);
  const out = (goOmitEmpty(rest) ?? {}) as Operation;
  const written: Operation = { ...out, initiatedBy: out.initiatedBy ?? {}, retry: out.retry ?? {} };
  if (info?.length) written.info = info;
  return written;
}

/** NewOperationState: the operation copied whole (info included), Running, startedAt now. */
export function newOperationState(op: Operation, now: number): OperationState {
  return { operation: asWrittenByArgo(op), phase: "Running", startedAt: wireTime(now) };
}

/** In progress: an operation state that has not completed (Running or Terminating). */
export const inProgress = (state: OperationState | null | undefined): state is OperationState =>
  !!state && !completed(state.phase);

export type RetryGate = { wait: number } | { retry: OperationState };

/**
 * A Running state with a finishedAt is a failed attempt waiting for its retry. Before its time,
 * wait; then the retry starts: finishedAt and syncResult dropped, and with retry.refresh the
 * pinned revision is dropped too, so the newest one is synced.
 */
export function retryGate(state: OperationState, now: number): RetryGate {
  const finished = Date.parse(state.finishedAt ?? "");
  const at = nextRetryAt(state.operation.retry, finished, state.retryCount ?? 0);
  if (at > now) return { wait: at - now };
  const next = structuredClone(state);
  let extra = "";
  if (next.operation.retry?.refresh && next.operation.sync) {
    extra = " with latest revisions";
    delete next.operation.sync.revision;
    delete next.operation.sync.revisions;
  }
  next.message = `Retrying operation${extra}. Attempt #${next.retryCount ?? 0}`;
  delete next.finishedAt;
  delete next.syncResult;
  return { retry: next };
}

/**
 * After an attempt ended Failed or Error: with retries left (and not terminated) the state goes
 * back to Running with finishedAt set and retryCount one higher; otherwise it stays completed.
 */
export function afterFailure(state: OperationState, terminating: boolean, now: number): OperationState {
  const next = structuredClone(state);
  const count = next.retryCount ?? 0;
  if (!terminating && hasRetriesLeft(next.operation.retry, count)) {
    const at = nextRetryAt(next.operation.retry, now, count);
    next.phase = "Running";
    next.finishedAt = wireTime(now);
    next.retryCount = count + 1;
    next.message = `${next.message ?? ""}. Retrying attempt #${next.retryCount} at ${kitchen(at)}.`;
  } else if (count > 0) {
    next.message = `${next.message ?? ""} (retried ${count} times).`;
  }
  return next;
}

/** Drops undefined and null members, as Go's omitempty marshalling does. */
function omitEmpty<T>(v: T): T {
  if (Array.isArray(v)) return v.map(omitEmpty) as T;
  if (v && typeof v === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) if (x !== undefined && x !== null) out[k] = omitEmpty(x);
    return out as T;
  }
  return v;
}

/**
 * The merge patch setOperationState sends: the state (completed ones get finishedAt now and clear
 * operation), plus an explicit finishedAt: null when a retry starts over a stored finishedAt.
 */
export function operationStatePatch(
  stored: OperationState | null | undefined,
  state: OperationState,
  now: number,
): Record<string, unknown> {
  const s = structuredClone(state);
  if (completed(s.phase)) s.finishedAt = wireTime(now);
  const opState: Record<string, unknown> = omitEmpty(s) as unknown as Record<string, unknown>;
  if (stored?.finishedAt && !s.finishedAt) opState.finishedAt = null;
  const patch: Record<string, unknown> = { status: { operationState: opState } };
  if (completed(s.phase)) patch.operation = null;
  return patch;
}
