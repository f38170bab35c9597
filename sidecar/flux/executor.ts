/**
 * The Flux operation, every reason the same (steps 1–7): make the artifact hold the commit,
 * recheck, record the operation on the claim, resume with a token in one guarded server-side
 * apply, follow until that token is handled and a reconcile provably ran, suspend again with a
 * second token, and complete once that one is handled. It never retries: the branch worker does.
 * Steps 1–2 are preparation.ts, 5–7 follower.ts; here the recheck, the record, the resume, restart
 * recovery and the graceful stop.
 */

import type { Attempt } from "../../queue/contract.js";
import { StatusReason } from "../../queue/crds/reasons.js";
import { errorMessage } from "../../queue/errors.js";
import {
  apiFailure,
  fluxStatusField,
  type KObject,
  kustomizationSourceOf,
  RESOURCES,
} from "../../queue/kube/index.js";
import { ConflictRetriesExhausted, retryOnConflict } from "../../queue/kube/retry.js";
import { applierField, claimField, type Logger } from "../../queue/log.js";
import {
  isNotStarted,
  type NotStarted,
  notStarted,
  type OperationExecutor,
  type RecoveredOperation,
  type ReportFn,
} from "../applier-kind.js";
import { attemptAudit } from "../audit.js";
import {
  type ClaimLocator,
  type Operation,
  RecordRefused,
  recordOperation,
  type SeenClaim,
  updateOperation,
  withdrawOperation,
  writeFailed,
} from "../operation-record.js";
import { endNotStarted, lastChecks } from "../operation-steps.js";
import { Aborted, newToken } from "./client.js";
import { DEFAULT_TIMINGS, type FluxExecutorDeps, type FluxTimings } from "./executor-deps.js";
import { FluxFollower } from "./follower.js";
import { markOf } from "./outcome.js";
import { prepare } from "./preparation.js";
import { keyOf, type ObjectKey, requestedAtOf } from "./resources.js";
import { checkSuspendOwnership } from "./suspend-owner.js";

export { DEFAULT_TIMINGS, type FluxExecutorDeps, type FluxTimings } from "./executor-deps.js";

const claimLocator = (c: { namespace: string; name: string }): ClaimLocator => ({
  type: RESOURCES.fluxClaim,
  namespace: c.namespace,
  name: c.name,
});

export class FluxExecutor implements OperationExecutor {
  private readonly t: FluxTimings;
  /** Operations this process resumed and has not suspended yet, for a graceful stop. */
  private readonly resumed = new Map<string, { ks: ObjectKey; claim: ClaimLocator; token: string }>();

  private readonly follower: FluxFollower;

  constructor(private readonly d: FluxExecutorDeps) {
    this.t = { ...DEFAULT_TIMINGS, ...d.timings };
    this.follower = new FluxFollower(d, this.t, this.resumed);
  }

  async execute(attempt: Attempt, report: ReportFn, signal: AbortSignal): Promise<void> {
    const log = this.d.log.child({
      claim: claimField(attempt.claim),
      applier: applierField(attempt.applier),
      token: attempt.token,
      commit: attempt.commit,
      branch: attempt.branchKey,
    });
    const claim = claimLocator(attempt.claim);
    const ks: ObjectKey = { namespace: attempt.applier.namespace, name: attempt.applier.name };
    let recorded: { previous?: Operation } | undefined;
    let resumed = false;
    // The window's watches list while the artifact is made to hold the commit: nothing in the list
    // depends on it, and every millisecond before the resume is revert window. Awaited before it.
    const watching = this.d.window?.open({
      token: attempt.token,
      claim: attempt.claim,
      branchKey: attempt.branchKey,
      applier: ks,
    });
    watching?.catch(() => {}); // a failure is thrown where it is awaited
    const withdraw = () =>
      recorded
        ? withdrawOperation(this.d.client.kube, claim, attempt.token, recorded.previous)
        : Promise.resolve();
    // Nothing was resumed: the attempt ends, and no record stays on the claim.
    const end = (r: NotStarted) => endNotStarted(r, { report, log, withdraw });
    try {
      const read = await prepare(
        {
          client: this.d.client,
          checks: this.d.checks,
          now: this.d.now,
          sourceTimeoutMs: this.t.sourceTimeoutMs,
        },
        { attempt, claim, ref: ks, signal, log },
      );
      if (isNotStarted(read)) return await end(read);
      // Each write of the operation starts from the claim the one before answered (guarded by its
      // resourceVersion: a change meanwhile is a 409 that reads again).
      const seen: SeenClaim = { claim: read.claim };
      // 3. Record before the write that starts it; a refused record starts nothing.
      const resumeToken = newToken(this.d.now());
      try {
        const r = await recordOperation(
          this.d.client.kube,
          claim,
          {
            token: attempt.token,
            commit: attempt.commit,
            targets: attempt.targets.map((t) => ({ uid: t.uid, reason: t.reason })),
            resumeToken,
            ...attemptAudit(attempt),
          },
          { now: this.d.now, seen },
        );
        recorded = { ...(r.previous ? { previous: r.previous } : {}) };
      } catch (err) {
        if (err instanceof RecordRefused)
          return await end(notStarted("RequestFailed", err.reason, err.message));
        throw err;
      }
      await watching;
      // The last checks, beside the report (a Stale one: the worker flushes again and sends the
      // commit that carries the newer edit).
      const refused = await lastChecks(attempt, this.d.checks, report("Requested"));
      if (refused) return await end(refused);
      if (signal.aborted)
        return await end(
          notStarted("RequestFailed", StatusReason.SidecarStopping, "the sidecar is stopping"),
        );
      // 4. Resume.
      const resume = await this.resume(ks, read.ks, resumeToken, log);
      if (isNotStarted(resume)) return await end(resume);
      recorded = undefined; // from here the operation is followed, never withdrawn
      resumed = true;
      this.resumed.set(attempt.token, { ks, claim, token: attempt.token });
      const startedAt = this.d.now().toISOString();
      try {
        await updateOperation(
          this.d.client.kube,
          claim,
          attempt.token,
          { phase: "Running", startedAt },
          { seen },
        );
      } catch (err) {
        // The apply runs whatever the API server answers: a failed write is no end. The record
        // still holds the resume token, which is all a restart needs to follow it.
        if (!writeFailed(err)) throw err;
        log.warn({ err: errorMessage(err) }, "could not record Running on the claim; following on");
      }
      await report("Running");
      await this.follower.follow(
        {
          claim,
          token: attempt.token,
          ks,
          commit: attempt.commit,
          resumeToken,
          since: { mark: resume.mark },
          resumedAt: resume.at,
          unresolved: false,
          report,
          log,
          seen,
        },
        signal,
      );
    } catch (err) {
      // Stopped before the resume (waiting for the source fetch, say): nothing started and no
      // record stays on the claim, so no restart could recover it. Say so; the worker decides anew.
      if (err instanceof Aborted && !resumed)
        return await end(
          notStarted(
            "RequestFailed",
            StatusReason.SidecarStopping,
            "the sidecar stopped before the apply started",
          ),
        );
      if (recorded)
        await withdraw().catch((e) =>
          log.warn({ err: errorMessage(e) }, "could not withdraw the operation record"),
        );
      if (err instanceof Aborted) await this.suspendOnStop(attempt.token, log);
      throw err;
    } finally {
      this.d.window?.close(attempt.token);
    }
  }

  /** Restart recovery: follows a recorded operation by its tokens, asking for nothing new. */
  async recover(r: RecoveredOperation, report: ReportFn, signal: AbortSignal): Promise<void> {
    const op = r.operation;
    const log = this.d.log.child({
      claim: claimField({ kind: r.claim.type.kind, namespace: r.claim.namespace, name: r.claim.name }),
      applier: applierField({ kind: "flux", ...r.applier }),
      token: op.token,
      commit: op.commit,
      branch: r.branchKey,
    });
    const claim = r.claim;
    const ks = r.applier;
    const since = { at: op.startedAt ?? op.requestedAt };
    const current = await this.d.client.kustomization(ks);
    if (!current) {
      await this.follower.complete(
        claim,
        op.token,
        { state: "Failed", reason: StatusReason.KustomizationNotFound, message: "the Kustomization is gone" },
        report,
        log,
      );
      return;
    }
    const claimRef = { kind: "FluxClaim" as const, namespace: claim.namespace, name: claim.name };
    void this.d.window?.open({
      token: op.token,
      claim: claimRef,
      branchKey: r.branchKey,
      applier: ks,
      missedSince: since.at,
    });
    try {
      const on = requestedAtOf(current);
      const handled = fluxStatusField(current, "lastHandledReconcileAt");
      const seen = (t: string | undefined) => t !== undefined && (on === t || handled === t);
      const seenClaim: SeenClaim = {};
      const recorded = { claim, token: op.token, ks, commit: op.commit, since, report, log, seen: seenClaim };
      if (!op.resumeToken) {
        // An external resume the claim suspended: complete it once its suspend is handled.
        const suspendToken = op.suspendToken ?? newToken(this.d.now());
        await this.follower.follow(
          {
            ...recorded,
            resumeToken: suspendToken,
            suspendWritten: seen(op.suspendToken),
            resumedAt: Date.parse(op.requestedAt),
            suspendToken,
            unresolved: true,
          },
          signal,
        );
        return;
      }
      if (seen(op.suspendToken) || seen(op.resumeToken)) {
        log.info({ phase: op.phase }, "following a recorded operation after a restart");
        this.resumed.set(op.token, { ks, claim, token: op.token });
        const settling = seen(op.suspendToken);
        await this.follower.follow(
          {
            ...recorded,
            resumeToken: op.resumeToken,
            resumedAt: Date.parse(since.at),
            ...(settling ? { suspendToken: op.suspendToken, suspendWritten: true } : {}),
            unresolved: op.phase === "Unresolved",
          },
          signal,
        );
        return;
      }
      // Recorded, never resumed (or a suspend it never reported followed): suspend, then Failed.
      const suspendToken = op.suspendToken ?? newToken(this.d.now());
      await updateOperation(
        this.d.client.kube,
        claim,
        op.token,
        { phase: "Settling", suspendToken },
        { seen: seenClaim },
      );
      await this.follower.follow(
        {
          ...recorded,
          resumeToken: op.resumeToken,
          resumedAt: Date.parse(op.requestedAt),
          suspendToken,
          unresolved: false,
          outcome: {
            state: "Failed",
            reason: StatusReason.NotResumed,
            message: "recorded but never resumed before a restart",
          },
        },
        signal,
      );
    } catch (err) {
      if (err instanceof Aborted) await this.suspendOnStop(op.token, log);
      throw err;
    } finally {
      this.d.window?.close(op.token);
    }
  }

  /** Graceful stop: whatever this process resumed and has not suspended yet is suspended now. */
  async shutdown(): Promise<void> {
    for (const token of [...this.resumed.keys()]) await this.suspendOnStop(token, this.d.log);
  }

  // -------------------------------------------------------------------------------------------
  // Step 4

  /**
   * One server-side apply of `suspend: false` and T1, guarded by uid and resourceVersion; a
   * conflict reads again and rechecks, on the shared conflict-retry policy (the first try writes
   * from the read the checks were made on). A lost answer may have landed, so it counts as a
   * resume, marked from the last read.
   */
  private async resume(
    ref: ObjectKey,
    read: KObject,
    token: string,
    log: Logger,
  ): Promise<NotStarted | { mark: ReturnType<typeof markOf>; at: number }> {
    let ks = read;
    let reads = 0;
    // Only the write's own failure may have landed; a failed re-read is thrown as it is.
    let writing = false;
    let at = this.d.now().getTime();
    // A re-read that refuses writes nothing and ends the attempt with this.
    let refused: NotStarted | undefined;
    try {
      const done = await retryOnConflict(
        async () => {
          writing = false;
          if (reads++ === 0) return ks;
          const next = await this.d.client.kustomization(ref);
          if (!next || next.metadata.uid !== ks.metadata.uid) {
            refused = notStarted(
              "RequestFailed",
              StatusReason.KustomizationReplaced,
              "the Kustomization was deleted or replaced before the resume",
            );
            return undefined;
          }
          const owner = checkSuspendOwnership(next);
          if (!owner.ok) {
            refused = notStarted("Rejected", owner.reason, owner.message);
            return undefined;
          }
          if (
            keyOf(kustomizationSourceOf(next, "none") ?? { namespace: "", name: "" }) !==
            keyOf(kustomizationSourceOf(ks, "none") ?? { namespace: "", name: "" })
          ) {
            refused = notStarted(
              "RequestFailed",
              StatusReason.SourceChanged,
              "the Kustomization's sourceRef changed before the resume",
            );
            return undefined;
          }
          ks = next;
          return ks;
        },
        (current) => current,
        async (_read, current) => {
          at = this.d.now().getTime();
          writing = true;
          const after = await this.d.client.applySuspend(ref, false, token, {
            uid: current.metadata.uid,
            resourceVersion: current.metadata.resourceVersion,
          });
          return { mark: markOf(after), at };
        },
        { what: `the resume of Kustomization ${keyOf(ref)}` },
      );
      if (refused) return refused;
      // The mutation always writes, so the policy always answers the write's result.
      return done as { mark: ReturnType<typeof markOf>; at: number };
    } catch (err) {
      if (!writing) throw err;
      if (err instanceof ConflictRetriesExhausted)
        return notStarted(
          "RequestFailed",
          StatusReason.ResumeConflict,
          "the Kustomization kept changing; not resumed",
        );
      const code = apiFailure(err).code;
      if (code === 404)
        return notStarted("RequestFailed", StatusReason.KustomizationNotFound, "the Kustomization is gone");
      if (code !== undefined && code >= 400 && code < 500)
        return notStarted("RequestFailed", StatusReason.ResumeRefused, errorMessage(err));
      log.warn({ err: errorMessage(err) }, "the resume's answer was lost; following it as if it landed");
      return { mark: markOf(ks), at };
    }
  }

  /** A stop with the Kustomization resumed: suspend it (T2 recorded first) and leave the rest to recovery. */
  private async suspendOnStop(token: string, log: Logger) {
    const r = this.resumed.get(token);
    if (!r) return;
    this.resumed.delete(token);
    try {
      const t2 = newToken(this.d.now());
      await updateOperation(this.d.client.kube, r.claim, token, { phase: "Settling", suspendToken: t2 });
      await this.d.client.suspend(r.ks, t2);
      log.info(
        { applier: applierField({ kind: "flux", ...r.ks }) },
        "suspended on stop; the next process completes the operation",
      );
    } catch (err) {
      log.error({ err: errorMessage(err) }, "could not suspend on stop");
    }
  }
}
