/**
 * Steps 5–7 of the Flux operation: following a resumed Kustomization by its tokens until the
 * resume's token is handled and a reconcile provably ran (the outcome), suspending it again with a
 * second token, and completing the operation once that one is handled; Unresolved past the
 * deadline, followed until it ends. Also how an operation is completed and reported.
 */
import { backoffMs } from "../../queue/backoff.js";
import { StatusReason } from "../../queue/crds/reasons.js";
import { errorMessage } from "../../queue/errors.js";
import {
  artifactRevisionOf,
  fluxReadyOf,
  fluxStatusField,
  fluxSuspended,
  type KObject,
  kustomizationSourceOf,
} from "../../queue/kube/index.js";
import type { Logger } from "../../queue/log.js";
import type { ReportFn } from "../applier-kind.js";
import {
  type ClaimLocator,
  completeOperation,
  type SeenClaim,
  updateOperation,
  writeFailed,
} from "../operation-record.js";
import { unresolvedEvent } from "../operation-steps.js";
import { Aborted, ksWakeKey, newToken } from "./client.js";
import type { FluxExecutorDeps, FluxTimings } from "./executor-deps.js";
import {
  commitOfRevision,
  type Outcome,
  type ReconcileMark,
  readOutcome,
  showsToken,
  tokenHandled,
} from "./outcome.js";
import { keyOf, type ObjectKey, requestedAtOf } from "./resources.js";

/** What following an operation needs to know. */
export interface Followed {
  claim: ClaimLocator;
  token: string;
  ks: ObjectKey;
  commit: string;
  resumeToken: string;
  since: { mark?: ReconcileMark; at?: string };
  /** When the resume was written (the Unresolved clock starts here). */
  resumedAt: number;
  suspendToken?: string;
  /** The suspend carrying suspendToken is on the object (only then can a token stamped over it stand in). */
  suspendWritten?: boolean;
  unresolved: boolean;
  report: ReportFn;
  log: Logger;
  /** The claim as its last operation write answered it: the next write starts from it. */
  seen: SeenClaim;
  /** Set once the outcome of the resumed reconcile has been read. */
  outcome?: Exclude<Outcome, { state: "Pending" }>;
}

/** A read while following that the watch's cache has not caught up with: wait for the next event. */
const NOT_YET = Symbol("not yet");

export class FluxFollower {
  constructor(
    private readonly d: FluxExecutorDeps,
    private readonly t: FluxTimings,
    /** Operations this process resumed and has not suspended yet, shared with the executor. */
    private readonly resumed: Map<string, { ks: ObjectKey; claim: ClaimLocator; token: string }>,
  ) {}

  async follow(f: Followed, signal: AbortSignal): Promise<void> {
    const client = this.d.client;
    let unresolvedInterval = client.pollMs;
    // Unresolved, each wait doubles the interval (the n-th wait is the n-th step of the backoff).
    let waits = 1;
    // Whether the watch's cache may answer the next read: after a watch event, and after a write of
    // ours (its event is on its way). The poll interval's re-read asks the API server.
    let fromCache = true;
    for (;;) {
      if (signal.aborted) throw new Aborted("stopping");
      const armed = client.wakeups.arm(
        ksWakeKey(f.ks),
        f.unresolved ? unresolvedInterval : client.pollMs,
        signal,
      );
      try {
        const read = await this.readFollowed(f, fromCache);
        if (read === NOT_YET) {
          fromCache = await armed.wait;
          continue;
        }
        const ks = read;
        if (!ks) {
          this.resumed.delete(f.token);
          await this.complete(
            f.claim,
            f.token,
            {
              state: "Failed",
              reason: StatusReason.KustomizationNotFound,
              message: "the Kustomization was deleted",
            },
            f.report,
            f.log,
            f.seen,
          );
          return;
        }
        if (f.suspendToken === undefined) {
          // 5. T1 handled and a reconcile ran since the resume: the outcome.
          const source = kustomizationSourceOf(ks, "none");
          const outcome = readOutcome(ks, {
            resumeToken: f.resumeToken,
            commit: f.commit,
            since: f.since,
            sourceRevision: await this.sourceRevisionIfNeeded(ks, f.commit, source),
          });
          if (outcome.state !== "Pending") {
            f.outcome = outcome;
            await this.startSuspend(f, "Settling", ks);
            fromCache = true;
            continue;
          }
          if (this.d.now().getTime() - f.resumedAt >= this.t.unresolvedAfterMs) {
            await this.startSuspend(f, "Unresolved", ks);
            fromCache = true;
            continue;
          }
        } else {
          // 6. Suspended again with T2; T2 handled proves every earlier reconcile ended.
          if (!f.suspendWritten) {
            await client.suspend(f.ks, f.suspendToken, ks);
            f.suspendWritten = true;
            armed.cancel();
            fromCache = true;
            continue;
          }
          if (tokenHandled(ks, f.suspendToken) && fluxSuspended(ks)) {
            this.resumed.delete(f.token);
            const outcome =
              f.outcome ??
              (() => {
                const o = readOutcome(ks, { resumeToken: f.resumeToken, commit: f.commit, since: f.since });
                return o.state === "Pending"
                  ? ({ state: "Failed", reason: StatusReason.NotReconciled, message: "no outcome" } as const)
                  : o;
              })();
            await this.complete(f.claim, f.token, outcome, f.report, f.log, f.seen);
            return;
          }
          if (
            !fluxSuspended(ks) ||
            (requestedAtOf(ks) !== f.suspendToken && !tokenHandled(ks, f.suspendToken))
          ) {
            f.log.info("the Kustomization was resumed before the suspend was handled; suspending again");
            await client.suspend(f.ks, f.suspendToken, ks);
          }
          if (!f.unresolved && this.d.now().getTime() - f.resumedAt >= this.t.unresolvedAfterMs) {
            await this.markUnresolved(f);
            f.unresolved = true;
          }
        }
      } catch (err) {
        // An API error while the apply runs is no end of it (an end is observed, never
        // guessed): read again at the next wake and write what is not written yet.
        if (!writeFailed(err)) {
          armed.cancel();
          throw err;
        }
        f.log.warn({ err: errorMessage(err) }, "an API call failed while following; reading again");
      }
      fromCache = await armed.wait;
      if (f.unresolved)
        unresolvedInterval = backoffMs(
          { initialMs: client.pollMs, maxMs: this.t.unresolvedMaxIntervalMs },
          ++waits,
        );
    }
  }

  /**
   * The Kustomization for one step of following. From the watch's cache when it may answer and
   * shows our last write (the token of the resume, or of the suspend once written): a cache that
   * does not show it yet has not delivered that write, and judging it (a suspend not seen would
   * be written again) waits for the next event instead. Read from the API server otherwise: the
   * poll interval's re-read, and whenever the watch does not run or does not hold the object.
   */
  private async readFollowed(f: Followed, fromCache: boolean): Promise<KObject | undefined | typeof NOT_YET> {
    const client = this.d.client;
    if (!fromCache) return client.kustomization(f.ks);
    const cached = client.cachedKustomization(f.ks);
    if (!cached) return client.kustomization(f.ks);
    const token =
      f.suspendToken === undefined ? f.resumeToken : f.suspendWritten ? f.suspendToken : undefined;
    return token === undefined || showsToken(cached, token) ? cached : NOT_YET;
  }

  /** Only the mismatch row needs the source: read it when Ready=True at another revision. */
  private async sourceRevisionIfNeeded(ks: KObject, commit: string, ref: ObjectKey | undefined) {
    if (
      fluxReadyOf(ks)?.status !== "True" ||
      commitOfRevision(fluxStatusField(ks, "lastAppliedRevision")) === commit ||
      !ref
    ) {
      return undefined;
    }
    return artifactRevisionOf(await this.d.client.observedSource(ref));
  }

  /** Records T2 (Settling or Unresolved), then writes the suspend that carries it. */
  private async startSuspend(f: Followed, phase: "Settling" | "Unresolved", ks: KObject) {
    const token = newToken(this.d.now());
    await updateOperation(
      this.d.client.kube,
      f.claim,
      f.token,
      { phase, suspendToken: token },
      { seen: f.seen },
    );
    // Only a recorded T2 is followed: a failed record is written again from the next read.
    f.suspendToken = token;
    await this.d.client.suspend(f.ks, token, ks);
    f.suspendWritten = true;
    this.resumed.delete(f.token);
    if (phase === "Unresolved") {
      f.unresolved = true;
      await this.markUnresolved(f, false);
    } else {
      await f.report("Settling");
    }
  }

  async markUnresolved(f: Followed, write = true) {
    if (write)
      await updateOperation(this.d.client.kube, f.claim, f.token, { phase: "Unresolved" }, { seen: f.seen });
    f.log.warn("operation unresolved: suspended, still followed");
    await f.report("Unresolved", {
      reason: StatusReason.OperationUnresolved,
      message: "not completed in time; suspended and still followed",
    });
    await unresolvedEvent(
      this.d.events,
      f.claim,
      `operation ${f.token} for ${f.commit} did not complete within ${Math.round(this.t.unresolvedAfterMs / 1000)}s; Kustomization ${keyOf(f.ks)} is suspended again and still followed`,
    );
  }

  async complete(
    claim: ClaimLocator,
    token: string,
    outcome: Exclude<Outcome, { state: "Pending" }>,
    report: ReportFn,
    log: Logger,
    seen?: SeenClaim,
  ) {
    const phase = outcome.state;
    const reason =
      outcome.state === "Failed"
        ? outcome.reason
        : outcome.revisionMismatch
          ? StatusReason.RevisionMismatch
          : StatusReason.Applied;
    try {
      await completeOperation(
        this.d.client.kube,
        claim,
        token,
        { phase, outcome: reason, message: outcome.message },
        { now: this.d.now, ...(seen ? { seen } : {}) },
      );
    } catch (err) {
      // A failed call is written again: following reads again and completes from that read (a
      // claim left showing the operation in flight would refuse every later attempt).
      if (writeFailed(err)) throw err;
      log.warn({ err: errorMessage(err) }, "could not complete the operation on the claim");
    }
    log.info({ phase, reason }, "operation completed");
    await report(phase, {
      reason,
      message: outcome.message,
      ...(outcome.state === "Succeeded" ? { revisionMismatch: outcome.revisionMismatch } : {}),
    });
  }
}
