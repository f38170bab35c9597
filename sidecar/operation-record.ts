/**
 * The operation on a claim's status (`status.operation`): recorded before the write that starts
 * an apply, moved through its phases by token (never by time), completed once its end is
 * observed. Every write goes through the status subresource, guarded by the resourceVersion just
 * read, and a conflict reads again and retries (a lost race never wedges a claim).
 */
import type { Operation, OperationPhase, OperationTarget } from "../queue/crds/index.js";
import { StatusReason } from "../queue/crds/reasons.js";
import {
  claimStatusOf,
  isConflict,
  type KObject,
  type Kube,
  KubeError,
  type OwnedStatus,
  type ResourceType,
  type RetryOptions,
  retryOnConflict,
  statusWriter,
} from "../queue/kube/index.js";
import { ConflictRetriesExhausted } from "../queue/kube/retry.js";

export type { Operation, OperationPhase, OperationTarget } from "../queue/crds/index.js";

import { errorMessage } from "../queue/errors.js";
import type { Logger } from "../queue/log.js";
import { historyEntry, withHistory } from "./audit.js";
import { sleepUnlessAborted } from "./sleep.js";

/**
 * A write of the record that the API server failed or answered with conflicts past their
 * retries: the record is as it was, and the write may be made again. Not a refusal of ours
 * (OperationNotFound, RecordRefused).
 */
export const writeFailed = (err: unknown): boolean =>
  err instanceof KubeError || err instanceof ConflictRetriesExhausted;

export interface ClaimLocator {
  type: ResourceType;
  namespace: string;
  name: string;
}

export const COMPLETED_PHASES: readonly OperationPhase[] = ["Succeeded", "Failed", "Superseded"];

/** Recorded and not completed. */
export function isInFlight(op: Operation | undefined): op is Operation {
  return op !== undefined && !COMPLETED_PHASES.includes(op.phase);
}

export function operationOf(claim: KObject | undefined): Operation | undefined {
  return claimStatusOf(claim)?.operation;
}

export type RefusalReason =
  | typeof StatusReason.ClaimNotFound
  | typeof StatusReason.ClaimDeleting
  | typeof StatusReason.OperationInFlight;

/** The record was refused: nothing may be started. */
export class RecordRefused extends Error {
  override name = "RecordRefused";
  constructor(
    readonly reason: RefusalReason,
    message: string,
  ) {
    super(message);
  }
}

/** No operation with this token is on the claim (another replaced it, or the claim is gone). */
export class OperationNotFound extends Error {
  override name = "OperationNotFound";
}

export interface NewOperation {
  token: string;
  commit: string;
  targets: OperationTarget[];
  /** Requested (a branch worker's attempt) or Unresolved (an external resume the reconciler suspended). */
  phase?: "Requested" | "Unresolved";
  requestedAt?: string;
  resumeToken?: string;
  suspendToken?: string;
  message?: string;
  /** The approvals and the override that let the attempt through (`attemptAudit`). */
  approvals?: Operation["approvals"];
  override?: Operation["override"];
}

export interface RecordOptions {
  now?: () => Date;
  retry?: RetryOptions;
  /**
   * The claim as its caller last read or wrote it, kept up to date by every write made with it:
   * an executor that writes one operation's phases one after the other writes each from the
   * answer to the one before, without a read between (the write is guarded by that
   * resourceVersion, so a change meanwhile is a 409 that reads again).
   */
  seen?: SeenClaim;
}

/** The claim as last read or written (see RecordOptions.seen). */
export interface SeenClaim {
  claim?: KObject;
}

const OPTIONAL_KEYS = [
  "startedAt",
  "completedAt",
  "resumeToken",
  "suspendToken",
  "message",
  "outcome",
  "approvals",
  "override",
] as const satisfies readonly (keyof Operation)[];

/**
 * A merge patch that makes status.operation exactly `op`: keys `op` lacks are sent as null, so
 * nothing of the operation recorded before leaks into this one.
 */
export function exactOperationPatch(op: Operation): Record<string, unknown> {
  const patch: Record<string, unknown> = { ...op };
  for (const k of OPTIONAL_KEYS) if (op[k] === undefined) patch[k] = null;
  return patch;
}

// ---------------------------------------------------------------------------------------------
// Pure decisions

export type RecordDecision =
  | { action: "write"; operation: Operation }
  | { action: "already"; operation: Operation }
  | { action: "refuse"; reason: RefusalReason; message: string };

/** Whether `op` may be recorded on `claim` as it was just read. */
export function decideRecord(claim: KObject | undefined, op: NewOperation, now: Date): RecordDecision {
  if (!claim)
    return { action: "refuse", reason: StatusReason.ClaimNotFound, message: "the claim does not exist" };
  if (claim.metadata.deletionTimestamp) {
    return { action: "refuse", reason: StatusReason.ClaimDeleting, message: "the claim is being deleted" };
  }
  const current = operationOf(claim);
  if (current?.token === op.token) return { action: "already", operation: current };
  if (isInFlight(current)) {
    return {
      action: "refuse",
      reason: StatusReason.OperationInFlight,
      message: `operation ${current.token} (${current.phase}) is still in flight`,
    };
  }
  const operation: Operation = {
    token: op.token,
    phase: op.phase ?? "Requested",
    commit: op.commit,
    targets: op.targets,
    requestedAt: op.requestedAt ?? now.toISOString(),
    ...(op.resumeToken ? { resumeToken: op.resumeToken } : {}),
    ...(op.suspendToken ? { suspendToken: op.suspendToken } : {}),
    ...(op.message ? { message: op.message } : {}),
    ...(op.approvals ? { approvals: op.approvals } : {}),
    ...(op.override ? { override: op.override } : {}),
  };
  return { action: "write", operation };
}

export interface OperationChange {
  phase?: OperationPhase;
  startedAt?: string;
  resumeToken?: string;
  suspendToken?: string;
  message?: string;
  outcome?: string;
}

/**
 * The operation after `change`, or undefined when nothing changes. A completed operation is
 * final: only completeOperation writes a terminal phase, and nothing moves it afterwards.
 */
export function applyChange(current: Operation, change: OperationChange): Operation | undefined {
  if (!isInFlight(current)) return undefined;
  if (change.phase && COMPLETED_PHASES.includes(change.phase)) {
    throw new Error("use completeOperation to end an operation");
  }
  const next: Operation = { ...current };
  for (const [k, v] of Object.entries(change)) {
    if (v !== undefined) (next as Record<string, unknown>)[k] = v;
  }
  const same = Object.keys(next).every(
    (k) => (next as Record<string, unknown>)[k] === (current as Record<string, unknown>)[k],
  );
  return same ? undefined : next;
}

// ---------------------------------------------------------------------------------------------
// Writes

async function readClaim(kube: Kube, claim: ClaimLocator): Promise<KObject | undefined> {
  return kube.get<KObject>(claim.type, claim.namespace, claim.name);
}

/**
 * The conflict-retry policy over the claim, starting from the claim last seen when there is one:
 * a write from it that lands saves the read. Anything else decided on it (a refusal, nothing to
 * write, a conflict) is decided again from a fresh read, so a claim seen before another party's
 * change never refuses or skips a write by itself. Every write's answer becomes the claim seen.
 */
async function writeFromSeen<W, R extends KObject>(
  kube: Kube,
  claim: ClaimLocator,
  seen: SeenClaim | undefined,
  mutate: (current: KObject | undefined) => W | undefined,
  write: (current: KObject, change: W) => Promise<R>,
  retry: RetryOptions | undefined,
): Promise<R | undefined> {
  const remember = async (current: KObject, change: W) => {
    try {
      const written = await write(current, change);
      if (seen) seen.claim = written;
      return written;
    } catch (err) {
      if (seen) delete seen.claim;
      throw err;
    }
  };
  const last = seen?.claim;
  if (last) {
    let change: W | undefined;
    try {
      change = mutate(last);
    } catch {
      change = undefined; // decided again below, from a fresh read
    }
    if (change !== undefined) {
      try {
        return await remember(last, change);
      } catch (err) {
        if (!isConflict(err)) throw err;
      }
    }
  }
  const done = await retryOnConflict(
    () => readClaim(kube, claim),
    mutate,
    (c, w) => remember(c!, w),
    retry,
  );
  return done;
}

function writeOperation(
  kube: Kube,
  claim: ClaimLocator,
  current: KObject,
  status: OwnedStatus<"claim", "operation-record">,
) {
  return statusWriter(kube, "claim", "operation-record").patch<KObject>(
    claim.type,
    claim.namespace,
    claim.name,
    status,
    current.metadata.resourceVersion,
  );
}

/**
 * Records a new operation before the write that starts it. Refused (RecordRefused, nothing may be
 * started) while the claim is being deleted or holds another operation in flight. Recording the
 * same token twice is a no-op. Returns the operation recorded and the one it replaced (for
 * withdrawOperation).
 */
export async function recordOperation(
  kube: Kube,
  claim: ClaimLocator,
  op: NewOperation,
  opts: RecordOptions = {},
): Promise<{ operation: Operation; previous?: Operation }> {
  const now = opts.now ?? (() => new Date());
  let outcome: { operation: Operation; previous?: Operation } | undefined;
  await writeFromSeen(
    kube,
    claim,
    opts.seen,
    (current) => {
      const d = decideRecord(current, op, now());
      if (d.action === "refuse") throw new RecordRefused(d.reason, d.message);
      const previous = operationOf(current);
      if (d.action === "already") {
        outcome = { operation: d.operation };
        return undefined;
      }
      outcome = { operation: d.operation, ...(previous ? { previous } : {}) };
      return d.operation;
    },
    (current, operation) =>
      writeOperation(kube, claim, current, { operation: exactOperationPatch(operation) }),
    opts.retry,
  );
  return outcome!;
}

/** Reads the operation recorded on a claim, uncached. */
export async function readOperation(kube: Kube, claim: ClaimLocator): Promise<Operation | undefined> {
  return operationOf(await readClaim(kube, claim));
}

function byToken(current: KObject | undefined, token: string): Operation {
  const op = operationOf(current);
  if (!current || op?.token !== token) {
    throw new OperationNotFound(`no operation ${token} on the claim (found ${op?.token ?? "none"})`);
  }
  return op;
}

/**
 * Moves the operation with `token` (phase, tokens, message). Throws OperationNotFound when the
 * claim holds another operation; a completed operation is left as it is.
 */
export async function updateOperation(
  kube: Kube,
  claim: ClaimLocator,
  token: string,
  change: OperationChange,
  opts: RecordOptions = {},
): Promise<Operation> {
  let result: Operation | undefined;
  await writeFromSeen(
    kube,
    claim,
    opts.seen,
    (current) => {
      const op = byToken(current, token);
      const next = applyChange(op, change);
      result = next ?? op;
      return next;
    },
    (current, next) => writeOperation(kube, claim, current, { operation: exactOperationPatch(next) }),
    opts.retry,
  );
  return result!;
}

export interface Completion {
  /** Superseded: ended because a newer tip superseded its commit (never counted a success). */
  phase: "Succeeded" | "Failed" | "Superseded";
  outcome?: string;
  message?: string;
}

/**
 * Completes the operation with `token`. A success also sets status.lastAppliedCommit, which the
 * branch worker reads back after a restart. Completing twice keeps the first completion.
 */
export async function completeOperation(
  kube: Kube,
  claim: ClaimLocator,
  token: string,
  completion: Completion,
  opts: RecordOptions = {},
): Promise<Operation> {
  const now = opts.now ?? (() => new Date());
  let result: Operation | undefined;
  await writeFromSeen(
    kube,
    claim,
    opts.seen,
    (current) => {
      const op = byToken(current, token);
      if (!isInFlight(op)) {
        result = op;
        return undefined;
      }
      const next: Operation = {
        ...op,
        phase: completion.phase,
        completedAt: now().toISOString(),
        ...(completion.outcome !== undefined ? { outcome: completion.outcome } : {}),
        ...(completion.message !== undefined ? { message: completion.message } : {}),
      };
      result = next;
      return next;
    },
    (current, next) =>
      writeOperation(kube, claim, current, {
        operation: exactOperationPatch(next),
        ...(next.phase === "Succeeded" ? { lastAppliedCommit: next.commit } : {}),
        // The audit: the ended operation joins the bounded history in the same write.
        history: withHistory(claimStatusOf(current)?.history, historyEntry(next)),
      }),
    opts.retry,
  );
  return result!;
}

/**
 * Completes the operation with `token` and writes it again every `pollMs` until the write lands:
 * the end is observed, and a claim left showing the operation in flight refuses every later
 * attempt. "stopped" when `signal` aborts first (restart recovery finds the record as it was),
 * "gone" when the claim records another operation or none.
 */
export async function completeUntilWritten(
  kube: Kube,
  claim: ClaimLocator,
  token: string,
  completion: Completion,
  o: RecordOptions & { signal: AbortSignal; pollMs: number; log: Logger },
): Promise<"written" | "gone" | "stopped"> {
  for (;;) {
    try {
      await completeOperation(kube, claim, token, completion, o);
      return "written";
    } catch (err) {
      if (err instanceof OperationNotFound) {
        o.log.warn({ err: err.message }, "operation record not found at completion");
        return "gone";
      }
      if (!writeFailed(err)) throw err;
      o.log.warn({ err: errorMessage(err) }, "could not record the end on the claim; writing it again");
      await sleepUnlessAborted(o.pollMs, o.signal);
      if (o.signal.aborted) return "stopped";
    }
  }
}

/**
 * Takes back a record whose attempt then started nothing, putting back what the status held, so
 * the claim never shows an operation nothing could have applied. Only while it is still Requested.
 */
export async function withdrawOperation(
  kube: Kube,
  claim: ClaimLocator,
  token: string,
  previous: Operation | undefined,
  opts: RecordOptions = {},
): Promise<boolean> {
  const done = await retryOnConflict(
    () => readClaim(kube, claim),
    (current) => {
      const op = operationOf(current);
      if (!current || op?.token !== token || op.phase !== "Requested") return undefined;
      return previous ? exactOperationPatch(previous) : null;
    },
    (current, restored) => writeOperation(kube, claim, current!, { operation: restored }),
    opts.retry,
  );
  return done !== undefined;
}
