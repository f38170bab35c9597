/**
 * What the claim reconciler does about operations after the fact: the Event of an operation's
 * end, whoever completed it; the end an earlier process recorded but may not have reported; and an
 * operation in flight that nothing here follows (restart recovery first, then OperationUnfollowed).
 * It keeps what it needs to do each once per process.
 */
import { StatusReason } from "../../queue/crds/reasons.js";
import { errorMessage } from "../../queue/errors.js";
import type { ClaimType, KObject, Kube } from "../../queue/kube/index.js";
import { claimField, type Logger } from "../../queue/log.js";
import type { ClaimContext, ClaimController } from "../applier-kind.js";
import type { EventRecorder, EventRegarding } from "../events.js";
import type { ExecutorHost } from "../executor.js";
import { type Following, UnfollowedClock } from "../following.js";
import {
  type ClaimLocator,
  COMPLETED_PHASES,
  completeOperation,
  isInFlight,
  type Operation,
  withdrawOperation,
} from "../operation-record.js";
import type { Reporter, Sent } from "../reporter.js";

export interface AftercareOptions {
  claimType: ClaimType;
  kube: Kube;
  log: Logger;
  events: EventRecorder;
  following: Following;
  controller: Pick<ClaimController, "settleUnfollowed">;
  executor?: Pick<ExecutorHost, "recover">;
  reporter?: Reporter;
  now: () => Date;
  /** An in-flight operation nobody follows is settled after this long. */
  unfollowedGraceMs: number;
  /** The reconciler's hooks context, with the operation set. */
  ctx(extra: Partial<ClaimContext>): ClaimContext;
}

export class Aftercare {
  private readonly unfollowed: UnfollowedClock;
  private readonly recoveryTried = new Set<string>();
  private readonly endsResent = new Set<string>();
  /** Ends completed before this process started may not have been reported. */
  private readonly startedAt: Date;

  constructor(private readonly o: AftercareOptions) {
    this.startedAt = o.now();
    this.unfollowed = new UnfollowedClock(o.unfollowedGraceMs);
  }

  regarding(claim: KObject): EventRegarding {
    const t = this.o.claimType;
    return {
      apiVersion: `${t.group}/${t.version}`,
      kind: t.kind,
      namespace: claim.metadata.namespace ?? "",
      name: claim.metadata.name,
      ...(claim.metadata.uid ? { uid: claim.metadata.uid } : {}),
    };
  }

  locator(claim: KObject): ClaimLocator {
    return { type: this.o.claimType, namespace: claim.metadata.namespace ?? "", name: claim.metadata.name };
  }

  private field(claim: KObject): string {
    return claimField({
      kind: this.o.claimType.kind,
      namespace: claim.metadata.namespace ?? "",
      name: claim.metadata.name,
    });
  }

  /**
   * An Event when an operation ends Succeeded or Failed, seen on the claim's status whoever
   * completed it (the executor, recovery, the OperationUnfollowed rule): alerting keys on it.
   */
  async announceEnd(claim: KObject, op: Operation | undefined, before: Operation | undefined): Promise<void> {
    if (!op || !COMPLETED_PHASES.includes(op.phase)) return;
    if (before?.token === op.token && !isInFlight(before)) return;
    await this.o.events
      .emit(operationEndEvent(op, this.regarding(claim)))
      .catch((err) =>
        this.o.log.warn({ err: errorMessage(err), token: op.token }, "could not record the Event"),
      );
  }

  /**
   * Reports again, once per process, the end of an operation an earlier process completed: it
   * may have been stopped (SIGKILL) between recording the end on the claim and queuing the
   * report, and the worker would then wait for that attempt forever. A duplicate end changes
   * nothing at the worker; an end this process recorded itself was reported by its executor.
   */
  async resendEnd(claim: KObject, op: Operation, branchKey: string): Promise<void> {
    const completedAt = op.completedAt ? Date.parse(op.completedAt) : Number.NaN;
    if (!this.o.reporter || this.endsResent.has(op.token)) return;
    if (!(completedAt < this.startedAt.getTime())) return;
    this.endsResent.add(op.token);
    // Before the report: a stalled check of the dead process's job must count it as ended.
    this.o.following.reportedEnd(op.token, op.phase);
    this.o.log.info(
      { token: op.token, commit: op.commit, phase: op.phase },
      "reporting a recorded end again",
    );
    await this.reportEnd(claim, op, branchKey, {
      phase: op.phase,
      ...(op.outcome ? { reason: op.outcome } : {}),
      ...(op.message ? { message: op.message } : {}),
    }).catch((err) => {
      this.endsResent.delete(op.token);
      this.o.log.warn({ err: errorMessage(err) }, "could not report a recorded end again");
    });
  }

  /** Reports an end of `op` to the worker, as its executor would have. */
  private reportEnd(
    claim: KObject,
    op: Operation,
    branchKey: string,
    end: { phase: Operation["phase"]; reason?: string; message?: string },
  ): Promise<Sent | undefined> {
    if (!this.o.reporter) return Promise.resolve(undefined);
    return this.o.reporter.phase({
      token: op.token,
      claim: {
        kind: this.o.claimType.kind,
        namespace: claim.metadata.namespace ?? "",
        name: claim.metadata.name,
      },
      branchKey,
      at: this.o.now().toISOString(),
      commit: op.commit,
      ...end,
    });
  }

  /**
   * Follows up an operation in flight nobody here follows: recovery first, then
   * OperationUnfollowed. Answers when to look again, if at all.
   */
  async followUp(
    claim: KObject,
    applier: { namespace: string; name: string },
    op: Operation,
    branchKey: string | undefined,
  ): Promise<number | undefined> {
    const { following } = this.o;
    const followed = following.isFollowed(op.token);
    if (!followed && following.ended(op.token)) return this.settleEndedRecord(claim, op);
    if (!followed && branchKey && this.o.executor && !this.recoveryTried.has(op.token)) {
      this.recoveryTried.add(op.token);
      const started = this.o.executor.recover({
        claim: this.locator(claim),
        applier,
        operation: op,
        branchKey,
      });
      if (started) {
        this.o.log.info(
          { claim: this.field(claim), token: op.token, commit: op.commit },
          "following a recorded operation",
        );
        return undefined;
      }
    }
    const now = this.o.now();
    if (!this.unfollowed.overdue(op.token, following.isFollowed(op.token), now)) {
      return following.isFollowed(op.token) ? undefined : this.unfollowed.remainingMs(op.token, now);
    }
    const settle = this.o.controller.settleUnfollowed;
    const safe = settle
      ? await settle.call(this.o.controller, claim, applier, op, this.o.ctx({ operation: op }))
      : true;
    if (!safe) return 2_000;
    const message = `operation ${op.token} was not followed by any sidecar for over a minute; the applier is held again`;
    await completeOperation(this.o.kube, this.locator(claim), op.token, {
      phase: "Failed",
      outcome: StatusReason.OperationUnfollowed,
      message,
    });
    this.unfollowed.forget(op.token);
    await this.o.events.emit({
      type: "Warning",
      reason: StatusReason.OperationUnfollowed,
      action: "Complete",
      note: message,
      regarding: this.regarding(claim),
    });
    if (this.o.reporter && branchKey) {
      await this.reportEnd(claim, op, branchKey, {
        phase: "Failed",
        reason: StatusReason.OperationUnfollowed,
        message,
      }).catch((err) => this.o.log.warn({ err: errorMessage(err) }, "could not report OperationUnfollowed"));
    }
    return undefined;
  }

  /**
   * An operation this process ended and reported whose record still shows it in flight: the write
   * of its end failed (a storm of conflicts outlasted the retries). The end is the one reported;
   * only the record lags, so it is brought level at once and reported nothing again (settled as
   * unfollowed a minute later, it was reported a second time: soak seed 30052). An end that started
   * nothing takes the record away, as the executor meant to (past Requested, completes it Failed);
   * Succeeded, Failed or Superseded completes it.
   */
  private async settleEndedRecord(claim: KObject, op: Operation): Promise<number | undefined> {
    const phase = this.o.following.endedAs(op.token);
    const locator = this.locator(claim);
    try {
      if (phase === "Succeeded" || phase === "Failed" || phase === "Superseded")
        await completeOperation(this.o.kube, locator, op.token, { phase });
      else if (!(await withdrawOperation(this.o.kube, locator, op.token, undefined)))
        // Past Requested (it resumed the applier) a record is completed, not taken away.
        await completeOperation(this.o.kube, locator, op.token, {
          phase: "Failed",
          message: `ended ${phase ?? "without a phase"} here; its record could not be written then`,
        });
    } catch (err) {
      this.o.log.warn(
        { claim: this.field(claim), token: op.token, err: errorMessage(err) },
        "could not bring the record of an ended operation level; trying again",
      );
      return 2_000;
    }
    this.o.log.info(
      { claim: this.field(claim), token: op.token, commit: op.commit, phase },
      "the record of an operation ended here showed it in flight; brought level with its reported end",
    );
    return undefined;
  }
}

/** The Event of an operation's end (pure): Normal OperationSucceeded, Warning OperationFailed. */
export function operationEndEvent(op: Operation, regarding: EventRegarding) {
  const succeeded = op.phase === "Succeeded";
  const detail = [op.outcome, op.message].filter(Boolean).join(": ");
  // Ended by a newer commit: no failure to alert on, and no success either.
  if (op.phase === "Superseded")
    return {
      type: "Normal" as const,
      reason: StatusReason.OperationSuperseded,
      action: "Apply",
      note: `operation ${op.token} for commit ${op.commit} was ended: a newer commit supersedes it${op.message ? ` (${op.message})` : ""}`,
      regarding,
    };
  return {
    type: succeeded ? ("Normal" as const) : ("Warning" as const),
    reason: succeeded ? StatusReason.OperationSucceeded : StatusReason.OperationFailed,
    action: "Apply",
    note: `operation ${op.token} for commit ${op.commit} ${succeeded ? "succeeded" : "failed"}${detail ? ` (${detail})` : ""}`,
    regarding,
  };
}
