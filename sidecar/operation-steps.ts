/**
 * The steps of an operation every kind takes the same way, around its own write that starts the
 * apply: the last checks just before that write, the end of an attempt that started nothing
 * (returned as NotStarted, never thrown), moving the claim's record while the apply runs, and
 * writing its observed end. A kind's executor calls these; it owns only what it writes to its
 * applier and how it reads the applier's status.
 */
import type { Attempt } from "../queue/contract.js";
import { StatusReason } from "../queue/crds/reasons.js";
import { errorMessage } from "../queue/errors.js";
import type { Kube } from "../queue/kube/index.js";
import type { Logger } from "../queue/log.js";
import { type NotStarted, notStarted, type ReportFn, type SafetyChecks } from "./applier-kind.js";
import type { EventRecorder } from "./events.js";
import {
  type ClaimLocator,
  completeUntilWritten,
  type OperationChange,
  OperationNotFound,
  type SeenClaim,
  updateOperation,
  writeFailed,
} from "./operation-record.js";
import { staleBecause } from "./tip-check.js";

/**
 * The last checks, read together beside the Requested report (`requested`), each answering for
 * the moment of the write that starts the apply: the tip the branch worker records (a moved tip
 * starts nothing: the worker decides again), the decision's standing (its GitTargets, the claim
 * in control, the grant), and the edit recheck (an edit accepted after the flush mark for the
 * applier's folders would be run over by this older commit).
 */
export async function lastChecks(
  attempt: Attempt,
  checks: SafetyChecks,
  requested: Promise<void> | undefined,
): Promise<NotStarted | undefined> {
  const [, current, standing, fresh] = await Promise.all([
    requested,
    checks.tip(attempt),
    checks.standing(attempt),
    checks.freshness(attempt),
  ]);
  if (!current)
    return notStarted(
      "Stale",
      StatusReason.Stale,
      `${attempt.commit} is no longer the tip of ${attempt.branch}`,
    );
  if (!standing.ok) return notStarted(standing.phase, standing.reason, standing.message);
  const stale = staleBecause(fresh, attempt);
  if (stale) return notStarted("Stale", stale.reason, stale.message);
  return undefined;
}

/**
 * Ends an attempt that started nothing: its window closed, the record taken back when it was made
 * (`withdraw`), and the phase reported as its end.
 */
export async function endNotStarted(
  r: NotStarted,
  o: { report: ReportFn; log: Logger; withdraw?: () => Promise<unknown>; closeWindow?: () => void },
): Promise<void> {
  o.closeWindow?.();
  await o
    .withdraw?.()
    .catch((err) => o.log.warn({ err: errorMessage(err) }, "could not withdraw the operation record"));
  o.log.info({ phase: r.phase, reason: r.reason }, r.message);
  await o.report(r.phase, { reason: r.reason, message: r.message });
}

/** Where an operation's record lives and how its writes go. */
export interface RecordOf {
  kube: Kube;
  claim: ClaimLocator;
  token: string;
  now: () => Date;
  log: Logger;
  report: ReportFn;
  /** The claim as the record's last write answered it: the next write starts from it. */
  seen?: SeenClaim;
}

/** The record of an operation an executor follows (`op`: its claim, token, log and report). */
export function recordOf(
  kube: Kube,
  now: () => Date,
  op: Pick<RecordOf, "claim" | "token" | "log" | "report" | "seen">,
): RecordOf {
  return {
    kube,
    now,
    claim: op.claim,
    token: op.token,
    log: op.log,
    report: op.report,
    ...(op.seen ? { seen: op.seen } : {}),
  };
}

/**
 * Moves the claim's record; false when the record is gone (the claim deleted or replaced: reported
 * Failed, ClaimGone, after `onGone`). A failed write is no end of the apply, which runs whatever
 * the API server answers: the record lags a phase and the operation is followed on (its end is
 * written when observed).
 */
export async function moveRecord(
  r: RecordOf,
  change: OperationChange,
  onGone?: () => Promise<void>,
): Promise<boolean> {
  try {
    await updateOperation(r.kube, r.claim, r.token, change, {
      now: r.now,
      ...(r.seen ? { seen: r.seen } : {}),
    });
    return true;
  } catch (err) {
    if (writeFailed(err)) {
      r.log.warn({ err: errorMessage(err) }, "could not move the operation on the claim; following on");
      return true;
    }
    if (!(err instanceof OperationNotFound)) throw err;
    await onGone?.();
    await r.report("Failed", { reason: StatusReason.ClaimGone, message: err.message });
    return false;
  }
}

/**
 * Writes the observed end on the claim until the write lands (a claim left showing the operation
 * in flight would refuse every later attempt), then reports it. A stop leaves it to restart
 * recovery, which observes the end again. `written`: runs once the end is on the claim.
 */
export async function completeRecord(
  r: RecordOf,
  end: { phase: "Succeeded" | "Failed" | "Superseded"; reason?: string; message: string },
  o: { signal: AbortSignal; pollMs: number; written?: () => Promise<void> },
): Promise<void> {
  const done = await completeUntilWritten(
    r.kube,
    r.claim,
    r.token,
    { phase: end.phase, ...(end.reason ? { outcome: end.reason } : {}), message: end.message },
    { now: r.now, ...(r.seen ? { seen: r.seen } : {}), signal: o.signal, pollMs: o.pollMs, log: r.log },
  );
  if (done === "stopped") return;
  await o.written?.();
  r.log.info({ phase: end.phase, reason: end.reason }, "operation completed");
  await r.report(end.phase, { ...(end.reason ? { reason: end.reason } : {}), message: end.message });
}

/** The Warning an Unresolved operation raises on its claim. */
export function unresolvedEvent(events: EventRecorder, claim: ClaimLocator, note: string): Promise<void> {
  return events.emit({
    type: "Warning",
    reason: StatusReason.OperationUnresolved,
    action: "Follow",
    note,
    regarding: {
      apiVersion: `${claim.type.group}/${claim.type.version}`,
      kind: claim.type.kind,
      namespace: claim.namespace,
      name: claim.name,
    },
  });
}
