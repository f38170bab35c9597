/**
 * The Flux operation, every reason the same (steps 1–7): make the artifact hold the commit,
 * recheck, record the operation on the claim, resume with a token in one guarded server-side
 * apply, follow until that token is handled and a reconcile provably ran, suspend again with a
 * second token, and complete once that one is handled. It never retries: the branch worker does.
 */

import { backoffMs } from "../../queue/backoff.js";
import type { Attempt } from "../../queue/contract.js";
import { StatusReason } from "../../queue/crds/reasons.js";
import { apiFailure, type KObject, KubeError, RESOURCES, readFluxClaim } from "../../queue/kube/index.js";
import { ConflictRetriesExhausted, retryOnConflict } from "../../queue/kube/retry.js";
import { applierField, claimField, type Logger } from "../../queue/log.js";
import {
  isNotStarted,
  type NotStarted,
  notStarted,
  type OperationExecutor,
  type RecoveredOperation,
  type ReportFn,
  type SafetyChecks,
  type WindowHooks,
} from "../applier-kind.js";
import { attemptAudit } from "../audit.js";
import { isConditionTrue } from "../claims/conditions.js";
import { sameRepository } from "../claims/eligibility.js";
import type { EventRecorder } from "../events.js";
import {
  type ClaimLocator,
  completeOperation,
  type Operation,
  RecordRefused,
  recordOperation,
  type SeenClaim,
  updateOperation,
  withdrawOperation,
  writeFailed,
} from "../operation-record.js";
import { endNotStarted, lastChecks, unresolvedEvent } from "../operation-steps.js";
import { Aborted, type FluxClient, ksWakeKey, newToken, srcWakeKey } from "./client.js";
import {
  artifactHolds,
  commitOfRevision,
  markOf,
  type Outcome,
  type ReconcileMark,
  readOutcome,
  tokenHandled,
} from "./outcome.js";
import {
  type Kustomization,
  keyOf,
  type ObjectKey,
  readyOf,
  requestedAtOf,
  sourceRefOf,
} from "./resources.js";
import { checkSuspendOwnership } from "./suspend-owner.js";

export interface FluxTimings {
  /** An operation not completed this long after its resume is Unresolved (default 5 minutes). */
  unresolvedAfterMs: number;
  /** Longest re-read interval while following an Unresolved operation (default 1 minute). */
  unresolvedMaxIntervalMs: number;
  /** How long step 1 waits for the GitRepository to handle its token (default 2 minutes). */
  sourceTimeoutMs: number;
}

export const DEFAULT_TIMINGS: FluxTimings = {
  unresolvedAfterMs: 5 * 60_000,
  unresolvedMaxIntervalMs: 60_000,
  sourceTimeoutMs: 2 * 60_000,
};

export interface FluxExecutorDeps {
  client: FluxClient;
  log: Logger;
  events: EventRecorder;
  now: () => Date;
  timings?: Partial<FluxTimings>;
  /** Asked before the resume: the tip (after the record), the claim's standing, the edit recheck. */
  checks: SafetyChecks;
  window?: WindowHooks;
}

/** What following an operation needs to know. */
interface Followed {
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

const claimLocator = (c: { namespace: string; name: string }): ClaimLocator => ({
  type: RESOURCES.fluxClaim,
  namespace: c.namespace,
  name: c.name,
});

export class FluxExecutor implements OperationExecutor {
  private readonly t: FluxTimings;
  /** Operations this process resumed and has not suspended yet, for a graceful stop. */
  private readonly resumed = new Map<string, { ks: ObjectKey; claim: ClaimLocator; token: string }>();

  constructor(private readonly d: FluxExecutorDeps) {
    this.t = { ...DEFAULT_TIMINGS, ...d.timings };
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
      const read = await this.prepare(attempt, claim, ks, signal, log);
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
        log.warn({ err: (err as Error).message }, "could not record Running on the claim; following on");
      }
      await report("Running");
      await this.follow(
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
          log.warn({ err: (e as Error).message }, "could not withdraw the operation record"),
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
      await this.complete(
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
      const handled = current.status?.lastHandledReconcileAt;
      const seen = (t: string | undefined) => t !== undefined && (on === t || handled === t);
      const seenClaim: SeenClaim = {};
      const recorded = { claim, token: op.token, ks, commit: op.commit, since, report, log, seen: seenClaim };
      if (!op.resumeToken) {
        // An external resume the claim suspended: complete it once its suspend is handled.
        const suspendToken = op.suspendToken ?? newToken(this.d.now());
        await this.follow(
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
        await this.follow(
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
      await this.follow(
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
  // Steps 1 and 2

  private async prepare(
    attempt: Attempt,
    claim: ClaimLocator,
    ref: ObjectKey,
    signal: AbortSignal,
    log: Logger,
  ) {
    // The Kustomization and its source are read beside the claim; the claim's refusals come first.
    const applier = this.checkApplierFresh(attempt, ref);
    applier.catch(() => {}); // awaited below, unless the claim already refuses
    const c = await this.d.client.kube.get<KObject>(claim.type, claim.namespace, claim.name);
    if (!c)
      return notStarted(
        "RequestFailed",
        StatusReason.ClaimNotFound,
        `FluxClaim ${keyOf(claim)} does not exist`,
      );
    if (c.metadata.deletionTimestamp)
      return notStarted("RequestFailed", StatusReason.ClaimDeleting, "the claim is being deleted");
    const typed = readFluxClaim(c);
    if (!typed.ok)
      return notStarted(
        "Rejected",
        StatusReason.InvalidSpec,
        `the FluxClaim does not fit its schema: ${typed.error}`,
      );
    const want = typed.value.spec.kustomizationRef;
    if (want?.name !== ref.name || want?.namespace !== ref.namespace) {
      return notStarted(
        "Rejected",
        StatusReason.ApplierMismatch,
        `the claim holds ${want ? keyOf(want) : "nothing"}, not ${keyOf(ref)}`,
      );
    }
    if (!isConditionTrue(typed.value.status?.conditions, "InControl")) {
      return notStarted(
        "RequestFailed",
        StatusReason.NotInControl,
        "the claim does not hold its Kustomization suspended (InControl is not True)",
      );
    }

    // 1. The artifact must hold the commit.
    const first = await applier;
    if (isNotStarted(first)) return first;
    // A cache behind the server never costs a fetch: an artifact not seen there is read again.
    let source = artifactHolds(first.source, attempt.commit)
      ? first.source
      : ((await this.d.client.source(first.sourceRef)) ?? first.source);
    if (!artifactHolds(source, attempt.commit)) {
      if (source.spec?.suspend) {
        return notStarted(
          "RequestFailed",
          StatusReason.SourceSuspended,
          `GitRepository ${keyOf(first.sourceRef)} is suspended`,
        );
      }
      const token = newToken(this.d.now());
      try {
        await this.d.client.stampSource(first.sourceRef, token);
      } catch (err) {
        // Nothing started yet: the attempt ends here and the worker decides the retry (2 s
        // backoff). A stamp that landed despite the error only makes the source fetch once more.
        if (!(err instanceof KubeError) || err.code === 404) throw err;
        return notStarted(
          "RequestFailed",
          StatusReason.SourceRequestFailed,
          `the stamp of GitRepository ${keyOf(first.sourceRef)} failed: ${err.message}`,
        );
      }
      log.debug({ sourceToken: token }, "stamped the GitRepository");
      const fetched = await this.d.client.until(
        () => this.d.client.source(first.sourceRef),
        (s) => (!s ? null : tokenHandled(s, token) ? s : undefined),
        {
          wakeKey: srcWakeKey(first.sourceRef),
          signal,
          deadline: this.d.now().getTime() + this.t.sourceTimeoutMs,
        },
      );
      if (!fetched) {
        return notStarted(
          "RequestFailed",
          fetched === null ? StatusReason.SourceNotFound : StatusReason.SourceNotFetched,
          "the GitRepository did not fetch in time",
        );
      }
      source = fetched;
      if (!artifactHolds(source, attempt.commit)) {
        const got = source.status?.artifact?.revision ?? "no artifact";
        if (!(await this.d.checks.tip(attempt))) {
          return notStarted(
            "Stale",
            StatusReason.Stale,
            `the source fetched ${got}; ${attempt.commit} is no longer the tip`,
          );
        }
        return notStarted(
          "RequestFailed",
          StatusReason.ArtifactMismatch,
          `the GitRepository fetched ${got}, not ${attempt.commit}`,
        );
      }
    }

    // 2. Recheck just before the resume (the source read beside the Kustomization: a changed
    // sourceRef is refused below anyway).
    let again = await this.checkApplierFresh(attempt, ref, first.sourceRef);
    if (isNotStarted(again)) return again;
    if (
      again.cached &&
      (again.ks.metadata.uid !== first.ks.metadata.uid ||
        keyOf(again.sourceRef) !== keyOf(first.sourceRef) ||
        !artifactHolds(again.source, attempt.commit))
    ) {
      // Refused on the cache: decided again from the API server (the fetch just seen there may
      // not have reached the watch yet).
      again = await this.checkApplier(attempt, ref, first.sourceRef, false);
      if (isNotStarted(again)) return again;
    }
    if (again.ks.metadata.uid !== first.ks.metadata.uid) {
      return notStarted(
        "RequestFailed",
        StatusReason.KustomizationReplaced,
        "the Kustomization was replaced during the fetch",
      );
    }
    if (keyOf(again.sourceRef) !== keyOf(first.sourceRef)) {
      return notStarted(
        "RequestFailed",
        StatusReason.SourceChanged,
        "the Kustomization's sourceRef changed during the fetch",
      );
    }
    if (!artifactHolds(again.source, attempt.commit)) {
      if (!(await this.d.checks.tip(attempt))) {
        return notStarted(
          "Stale",
          StatusReason.Stale,
          `${attempt.commit} is no longer the tip of ${attempt.branch}`,
        );
      }
      return notStarted(
        "RequestFailed",
        StatusReason.ArtifactMoved,
        `the artifact moved to ${again.source.status?.artifact?.revision}`,
      );
    }
    if (!(await this.d.checks.tip(attempt))) {
      return notStarted(
        "Stale",
        StatusReason.Stale,
        `${attempt.commit} is no longer the tip of ${attempt.branch}`,
      );
    }
    return { ...again, claim: c };
  }

  /**
   * Reads the Kustomization and its GitRepository and checks what a resume requires of them. From
   * the watch's cache when it holds them: the resume is guarded by the resourceVersion read here,
   * so a Kustomization changed since (the cache behind the server) is a 409 that reads the API
   * server again and rechecks; the artifact may move after any read, which the outcome's revision
   * check reports (RevisionMismatch).
   */
  private async checkApplier(attempt: Attempt, ref: ObjectKey, expectedSource?: ObjectKey, cached = true) {
    const client = this.d.client;
    const readSource = (r: ObjectKey) => (cached ? client.observedSource(r) : client.source(r));
    const early = expectedSource ? readSource(expectedSource) : undefined;
    early?.catch(() => {}); // awaited below, unless the Kustomization already refuses
    const ks = await (cached ? client.observedKustomization(ref) : client.kustomization(ref));
    if (!ks)
      return notStarted(
        "RequestFailed",
        StatusReason.KustomizationNotFound,
        `Kustomization ${keyOf(ref)} does not exist`,
      );
    if (ks.metadata.deletionTimestamp)
      return notStarted(
        "RequestFailed",
        StatusReason.KustomizationDeleting,
        "the Kustomization is being deleted",
      );
    const owner = checkSuspendOwnership(ks);
    if (!owner.ok) return notStarted("Rejected", owner.reason, owner.message);
    const sourceRef = sourceRefOf(ks);
    if (sourceRef?.kind !== "GitRepository") {
      return notStarted(
        "Rejected",
        StatusReason.UnsupportedSource,
        `the Kustomization reads a ${sourceRef?.kind ?? "missing"} source; only GitRepository is held`,
      );
    }
    const source =
      early && keyOf(sourceRef) === keyOf(expectedSource as ObjectKey)
        ? await early
        : await readSource(sourceRef);
    if (!source)
      return notStarted(
        "RequestFailed",
        StatusReason.SourceNotFound,
        `GitRepository ${keyOf(sourceRef)} does not exist`,
      );
    const url = source.spec?.url ?? "";
    const branch = source.spec?.ref?.branch;
    if (!sameRepository(url, attempt.repository) || branch !== attempt.branch) {
      return notStarted(
        "Rejected",
        StatusReason.SourceMismatch,
        `the GitRepository fetches ${url} branch ${branch ?? "(none)"}, not ${attempt.repository} branch ${attempt.branch}`,
      );
    }
    return { ks, source, sourceRef, cached };
  }

  /** checkApplier from the cache; a refusal decided there is decided again from the API server. */
  private async checkApplierFresh(attempt: Attempt, ref: ObjectKey, expectedSource?: ObjectKey) {
    const r = await this.checkApplier(attempt, ref, expectedSource);
    return isNotStarted(r) ? this.checkApplier(attempt, ref, expectedSource, false) : r;
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
    read: Kustomization,
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
            keyOf(sourceRefOf(next) ?? { namespace: "", name: "" }) !==
            keyOf(sourceRefOf(ks) ?? { namespace: "", name: "" })
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
        return notStarted("RequestFailed", StatusReason.ResumeRefused, (err as Error).message);
      log.warn({ err: (err as Error).message }, "the resume's answer was lost; following it as if it landed");
      return { mark: markOf(ks), at };
    }
  }

  // -------------------------------------------------------------------------------------------
  // Steps 5–7

  private async follow(f: Followed, signal: AbortSignal): Promise<void> {
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
          const source = sourceRefOf(ks);
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
          if (tokenHandled(ks, f.suspendToken) && ks.spec?.suspend === true) {
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
            ks.spec?.suspend !== true ||
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
        f.log.warn({ err: (err as Error).message }, "an API call failed while following; reading again");
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
  private async readFollowed(
    f: Followed,
    fromCache: boolean,
  ): Promise<Kustomization | undefined | typeof NOT_YET> {
    const client = this.d.client;
    if (!fromCache) return client.kustomization(f.ks);
    const cached = client.cachedKustomization(f.ks);
    if (!cached) return client.kustomization(f.ks);
    const token =
      f.suspendToken === undefined ? f.resumeToken : f.suspendWritten ? f.suspendToken : undefined;
    const shows =
      token === undefined ||
      requestedAtOf(cached) === token ||
      cached.status?.lastHandledReconcileAt === token;
    return shows ? cached : NOT_YET;
  }

  /** Only the mismatch row needs the source: read it when Ready=True at another revision. */
  private async sourceRevisionIfNeeded(ks: Kustomization, commit: string, ref: ObjectKey | undefined) {
    if (
      readyOf(ks)?.status !== "True" ||
      commitOfRevision(ks.status?.lastAppliedRevision) === commit ||
      !ref
    ) {
      return undefined;
    }
    return (await this.d.client.observedSource(ref))?.status?.artifact?.revision;
  }

  /** Records T2 (Settling or Unresolved), then writes the suspend that carries it. */
  private async startSuspend(f: Followed, phase: "Settling" | "Unresolved", ks: Kustomization) {
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

  private async markUnresolved(f: Followed, write = true) {
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

  private async complete(
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
      log.warn({ err: (err as Error).message }, "could not complete the operation on the claim");
    }
    log.info({ phase, reason }, "operation completed");
    await report(phase, {
      reason,
      message: outcome.message,
      ...(outcome.state === "Succeeded" ? { revisionMismatch: outcome.revisionMismatch } : {}),
    });
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
      log.error({ err: (err as Error).message }, "could not suspend on stop");
    }
  }
}
