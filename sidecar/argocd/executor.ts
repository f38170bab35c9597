/**
 * Carries out one sync for the branch worker (the imperative shell around sync.ts and stale.ts):
 * wait out any operation set on the Application (terminating ours only when proven stale), record
 * the operation on the claim, update the whole Application at the version read with our pinned
 * operation, and follow the token to its observed end, reporting each phase. Never retries.
 *
 * The Application is followed through the watch of its namespace (watch.ts): reads come from the
 * cache and waits wake on its events, not on a poll. The cache may lag behind the API server, so
 * nothing it shows may refuse, fail or terminate by itself: each such decision is taken again on
 * a read from the API server. The update that starts the sync is guarded by the version it was
 * made from, so a cache behind the server costs a 409 that reads the server again. Ending an
 * operation on proof is stale-operations.ts; an update whose answer was lost, lost-update.ts.
 */

import { backoffMs } from "../../queue/backoff.js";
import type { Attempt, SupersededNotice } from "../../queue/contract.js";
import { StatusReason } from "../../queue/crds/reasons.js";
import { apiFailure, applicationAutomatedOf, type KObject, RESOURCES } from "../../queue/kube/index.js";
import { applierField, claimField, type Logger } from "../../queue/log.js";
import type * as Kind from "../applier-kind.js";
import { notStarted } from "../applier-kind.js";
import { attemptAudit } from "../audit.js";
import {
  type ClaimLocator,
  type Operation,
  type OperationChange,
  RecordRefused,
  recordOperation,
  type SeenClaim,
  withdrawOperation,
} from "../operation-record.js";
import {
  completeRecord,
  endNotStarted,
  lastChecks,
  moveRecord,
  type RecordOf,
  recordOf,
} from "../operation-steps.js";
import { sleepUnlessAborted } from "../sleep.js";
import { APPLICATION, isAutomatedSyncEnabled, sourceOf } from "./application.js";
import type { ArgoCDExecutorDeps } from "./executor-deps.js";
import { afterLostUpdate } from "./lost-update.js";
import { StaleOperations } from "./stale-operations.js";
import { buildSyncOperation, busyWith, refreshPatch, startSyncUpdate, syncProgress } from "./sync.js";
import { ApplicationWatch, type AppRef, appKey } from "./watch.js";

export type { ArgoCDExecutorDeps, ArgoCDExecutorOptions } from "./executor-deps.js";

/** A read of the KObject, and whether the watch's cache answered it (a cache may lag). */
interface Read {
  app: KObject | undefined;
  cached: boolean;
}

/** The update's answer never came: it may or may not have landed. */
function answerLost(err: unknown): boolean {
  const code = apiFailure(err).code;
  return code === undefined || code >= 500;
}
const codeOf = (err: unknown) => apiFailure(err).code;

interface Ctx {
  token: string;
  commit: string;
  claim: ClaimLocator;
  app: { namespace: string; name: string };
  branchKey: string;
  report: Kind.ReportFn;
  signal: AbortSignal;
  log: Logger;
  /** The claim as the operation's last write answered it: the next write starts from it. */
  seen: SeenClaim;
  /** When a recovered operation started (a new process follows it): see `WindowOpening.missedSince`. */
  missedSince?: string;
  /** The branch worker found it superseded (the notice, handed in or read back). */
  superseded?: SupersededNotice;
  /** Terminated by this process as superseded, by this tip: its end is Superseded. */
  terminated?: string;
}

export class ArgoCDExecutor implements Kind.OperationExecutor {
  private readonly pollMs: number;
  private readonly busyWaitMs: number;
  private readonly budgetMs: number;
  private readonly maxPollMs: number;
  private readonly resyncMs: number;
  readonly applications: ApplicationWatch;
  private readonly stale: StaleOperations;
  /** The operations this process follows, by token (a supersession notice finds its follower here). */
  private readonly following = new Map<string, Ctx>();

  constructor(private readonly d: ArgoCDExecutorDeps) {
    const o = d.options ?? {};
    this.applications = d.applications ?? new ApplicationWatch(d.kube, d.log);
    this.stale = new StaleOperations({
      kube: d.kube,
      events: d.events,
      applications: this.applications,
      ...(d.options?.ancestry ? { ancestry: d.options.ancestry } : {}),
      ...(d.supersessions ? { supersessions: d.supersessions } : {}),
    });
    this.pollMs = o.pollMs ?? 1000;
    this.resyncMs = o.resyncMs ?? 30_000;
    this.busyWaitMs = o.busyWaitMs ?? 5 * 60_000;
    this.budgetMs = o.budgetMs ?? 5 * 60_000;
    this.maxPollMs = o.maxPollMs ?? 60_000;
  }

  /** Stops the Applications' watches (after every running operation saw its signal abort). */
  async shutdown(): Promise<void> {
    await this.applications.stop();
  }

  /** The branch worker found an operation this process follows superseded: its follower wakes to end it. */
  supersede(notice: SupersededNotice): void {
    const c = this.following.get(notice.token);
    if (!c || c.superseded) return;
    c.superseded = notice;
    this.applications.wakeups.notify(appKey(c.app));
  }

  /**
   * The Application from the watch's cache when `fromCache` and it holds it, else from the API
   * server (so "not found" is always the server's answer).
   */
  private async readApp(ref: AppRef, fromCache: boolean): Promise<Read> {
    const hit = fromCache ? this.applications.cached(ref) : undefined;
    if (hit) return { app: hit, cached: true };
    return { app: await this.applications.read(ref), cached: false };
  }

  /**
   * How long a wait for the Application's next event lasts: while the watch runs, the safety net
   * (`resyncMs`); without it, `pollMs` (or `fallback`); never past `deadline` (epoch ms).
   */
  private waitMs(ref: AppRef, fallback: number, deadline?: number): number {
    const ms = this.applications.watching(ref) ? this.resyncMs : fallback;
    return deadline === undefined ? ms : Math.max(0, Math.min(ms, deadline - this.d.now().getTime()));
  }

  async execute(attempt: Attempt, report: Kind.ReportFn, signal: AbortSignal): Promise<void> {
    const c: Ctx = {
      token: attempt.token,
      commit: attempt.commit,
      claim: { type: RESOURCES.argoCDClaim, namespace: attempt.claim.namespace, name: attempt.claim.name },
      app: { namespace: attempt.applier.namespace, name: attempt.applier.name },
      branchKey: attempt.branchKey,
      report,
      signal,
      seen: {},
      log: this.d.log.child({
        claim: claimField(attempt.claim),
        applier: applierField(attempt.applier),
        token: attempt.token,
        commit: attempt.commit,
        branch: attempt.branchKey,
      }),
    };
    const now = () => this.d.now().getTime();
    const waitUntil = now() + this.busyWaitMs;
    let recorded: { previous?: Operation } | undefined;
    let requested: Promise<void> | undefined;
    let windowOpened = false;
    const closeWindow = () => {
      if (windowOpened) this.d.windows?.close(c.token);
      windowOpened = false;
    };
    const withdraw = () =>
      recorded ? withdrawOperation(this.d.kube, c.claim, c.token, recorded.previous) : Promise.resolve();
    // The sync was not started: nothing to follow, and no record stays on the claim.
    const end = (r: Kind.NotStarted) => endNotStarted(r, { report, log: c.log, withdraw, closeWindow });

    // Set from the update that starts the sync (its answer lost, it may have landed): from there
    // the operation is followed, never withdrawn.
    let started = false;
    // Whether the watch's cache may answer the next read: not after a refusal decided on it (it is
    // decided again from the API server), a conflict, or a wait that no event ended.
    let fromCache = true;
    try {
      await this.applications.serve(c.app.namespace);
      for (;;) {
        // Stopped before the sync started: no record stays on the claim, so no restart could recover
        // it. Say so; the worker decides anew.
        if (signal.aborted)
          return end(
            notStarted(
              "RequestFailed",
              StatusReason.SidecarStopping,
              "the sidecar stopped before the sync started",
            ),
          );
        // Armed before the read, so an event between the read and the wait is not missed.
        const armed = this.applications.wakeups.arm(
          appKey(c.app),
          this.waitMs(c.app, this.pollMs, waitUntil),
          signal,
        );
        let read: Read;
        try {
          read = await this.readApp(c.app, fromCache);
        } catch (err) {
          armed.cancel();
          throw err;
        }
        fromCache = true;
        const app = read.app;
        // A refusal seen in the cache is decided again on the API server's answer.
        const confirm = () => {
          armed.cancel();
          fromCache = false;
        };
        if (!app)
          return end(
            notStarted(
              "Rejected",
              StatusReason.ApplicationNotFound,
              `Application ${c.app.namespace}/${c.app.name} not found`,
            ),
          );
        const source = sourceOf(app);
        if (source.state === "Unsupported") {
          if (read.cached) {
            confirm();
            continue;
          }
          return end(notStarted("Rejected", source.reason, source.message));
        }
        if (isAutomatedSyncEnabled(applicationAutomatedOf(app))) {
          if (read.cached) {
            confirm();
            continue;
          }
          return end(
            notStarted(
              "Rejected",
              StatusReason.NotHeld,
              "automated sync is on: the claim does not hold this Application now",
            ),
          );
        }
        const busy = busyWith(app);
        if (busy.busy) {
          const terminate = await this.stale.terminateIfStale(c, {
            commit: c.commit,
            seen: app,
            cached: read.cached,
            fatalOnForbidden: true,
          });
          if (terminate.fatal) {
            armed.cancel();
            return end(notStarted("Rejected", StatusReason.TerminateForbidden, terminate.fatal));
          }
          if (terminate.retry && now() < waitUntil) {
            // A terminate that conflicted or failed changed nothing on the KObject, so no watch
            // event would end the wait: tried again after a poll interval, on the server's answer.
            armed.cancel();
            await sleepUnlessAborted(Math.min(this.pollMs, Math.max(0, waitUntil - now())), signal);
            fromCache = false;
            continue;
          }
          if (now() >= waitUntil) {
            if (read.cached) {
              confirm();
              continue;
            }
            armed.cancel();
            return end(notStarted("RequestFailed", StatusReason.OperationInProgress, busy.message));
          }
          // Waited out on the watch: its next event about the KObject, else a read of the server.
          fromCache = await armed.wait;
          continue;
        }
        armed.cancel();

        if (!recorded) {
          try {
            const r = await recordOperation(
              this.d.kube,
              c.claim,
              {
                token: c.token,
                commit: c.commit,
                targets: attempt.targets.map((t) => ({ uid: t.uid, reason: t.reason })),
                ...attemptAudit(attempt),
              },
              { now: this.d.now, seen: c.seen },
            );
            recorded = r.previous ? { previous: r.previous } : {};
          } catch (err) {
            if (!(err instanceof RecordRefused)) throw err;
            const phase = err.reason === StatusReason.OperationInFlight ? "RequestFailed" : "Dropped";
            return end(notStarted(phase, err.reason, err.message));
          }
          requested = report("Requested");
          // No second read of the Application: the update is guarded by the version read above,
          // so a change meanwhile is a 409 that reads again. Every read here is revert window.
        }

        // The last checks, beside the report (a claim waiting in line or not in control never syncs).
        const refused = await lastChecks(attempt, this.d.checks, requested);
        requested = undefined;
        if (refused) return end(refused);

        const op = buildSyncOperation(app, {
          commit: c.commit,
          token: c.token,
          reasons: attempt.targets.map((t) => t.reason),
        });
        // The window opens before the update that starts the sync: Argo CD may apply before this
        // process reads the answer, and a write seen before the window opened is never reported.
        await this.openWindow(c);
        windowOpened = true;
        started = true;
        try {
          await this.d.kube.replace(APPLICATION, startSyncUpdate(app, op));
        } catch (err) {
          const code = codeOf(err);
          if (code === 409) {
            // Changed since the version read (the cache may have been behind): read the server.
            started = false;
            fromCache = false;
            continue;
          }
          if (!answerLost(err)) {
            return end(
              code === 403
                ? notStarted("Rejected", StatusReason.Forbidden, apiFailure(err).message)
                : notStarted("RequestFailed", StatusReason.UpdateRefused, apiFailure(err).message),
            );
          }
          c.log.warn({ err: apiFailure(err).message }, "the update's answer was lost; following its token");
          if (!(await this.landedAfterLoss(app.metadata.resourceVersion ?? "", c))) return closeWindow();
        }
        c.log.info("sync requested");
        return this.follow(c, { unresolved: false });
      }
    } catch (err) {
      // A throw before the sync started (Redis away for a check, an API error) starts nothing: the
      // record is taken back, or a restart's recovery would end the attempt a second time.
      if (!started) {
        closeWindow();
        if (recorded)
          await withdrawOperation(this.d.kube, c.claim, c.token, recorded.previous).catch(() => false);
      }
      throw err;
    }
  }

  async recover(r: Kind.RecoveredOperation, report: Kind.ReportFn, signal: AbortSignal): Promise<void> {
    const c: Ctx = {
      token: r.operation.token,
      commit: r.operation.commit,
      claim: r.claim,
      app: r.applier,
      branchKey: r.branchKey,
      report,
      signal,
      seen: {},
      missedSince: r.operation.startedAt ?? r.operation.requestedAt,
      log: this.d.log.child({
        claim: claimField({ kind: r.claim.type.kind, namespace: r.claim.namespace, name: r.claim.name }),
        applier: applierField({ kind: "argocd", ...r.applier }),
        token: r.operation.token,
        commit: r.operation.commit,
        branch: r.branchKey,
        recovered: true,
      }),
    };
    const app = await this.d.kube.get(APPLICATION, c.app.namespace, c.app.name);
    if (!app)
      return this.complete(c, "Failed", StatusReason.ApplicationDeleted, "the Application was deleted");
    if (syncProgress(app, c.token).stage === "Absent") {
      // Stopped between the record and the update, or the update's answer was lost with the
      // process: make sure it can never land now, then it is Failed and asked again.
      c.log.info("recovered operation never reached the Application");
      if (!(await this.landedAfterLoss(app.metadata.resourceVersion ?? "", c))) return;
    }
    c.log.info("following a recovered operation");
    return this.follow(c, { unresolved: r.operation.phase === "Unresolved" });
  }

  /**
   * After a lost answer: the token in `operation` or the operation state means it landed. Neither
   * means not made yet; a write at the version the update was made from then makes sure it never
   * lands. A conflict on that write reads again. Returns true when it landed.
   */
  private async landedAfterLoss(readVersion: string, c: Ctx): Promise<boolean> {
    const r = await afterLostUpdate(this.d.kube, c, readVersion, this.pollMs);
    if (r === "Deleted")
      await this.complete(c, "Failed", StatusReason.ApplicationDeleted, "the Application was deleted");
    if (r === "Fenced")
      await this.complete(
        c,
        "Failed",
        StatusReason.UpdateLost,
        "the update starting the sync got no answer and did not land; it never will now",
      );
    return r === "Landed";
  }

  /** Follows the token until the operation state carrying it completed. */
  private async follow(c: Ctx, from: { unresolved: boolean }): Promise<void> {
    const now = () => this.d.now().getTime();
    const start = now();
    let unresolved = from.unresolved;
    let interval = this.pollMs;
    // Unresolved, each wait doubles the interval (the n-th wait is the n-th step of the backoff).
    let waits = 1;
    let lastRunning: string | undefined;
    // Whether the watch's cache may answer the next read: after one of its events; a wait that no
    // event ended, and a failure seen in the cache, read the API server.
    let fromCache = true;
    // Whether the kept supersession notice is read: at the start (a recovery, a notice sent before
    // this process followed it) and after every wait no event ended (a missed message).
    let readNotice = true;
    this.following.set(c.token, c);
    await this.openWindow(c);
    try {
      await this.applications.serve(c.app.namespace);
      for (;;) {
        if (c.signal.aborted) return;
        // Armed before the read, so an event between the read and the wait is not missed. The
        // budget's end wakes it too.
        const armed = this.applications.wakeups.arm(
          appKey(c.app),
          this.waitMs(c.app, interval, unresolved ? undefined : start + this.budgetMs),
          c.signal,
        );
        let read: Read;
        try {
          read = await this.readApp(c.app, fromCache);
        } catch (err) {
          c.log.warn({ err: apiFailure(err).message }, "cannot read the KObject; following on");
          fromCache = await armed.wait;
          continue;
        }
        fromCache = true;
        const app = read.app;
        if (!app) {
          armed.cancel();
          return this.complete(c, "Failed", StatusReason.ApplicationDeleted, "the Application was deleted");
        }
        const p = syncProgress(app, c.token);
        if (p.stage === "Completed") {
          // An operation state carrying our token, completed: the server held it, whatever came since.
          armed.cancel();
          const ok = p.phase === "Succeeded";
          // Ended by our terminate: superseded, never a failure of its own (and never a success).
          if (!ok && c.terminated)
            return this.complete(
              c,
              "Superseded",
              StatusReason.Superseded,
              `superseded by ${c.terminated}: ${p.message ?? `sync ${p.phase}`}`,
            );
          await this.compareAnew(c);
          return this.complete(
            c,
            ok ? "Succeeded" : "Failed",
            ok ? undefined : `Sync${p.phase}`,
            p.message ?? `sync ${p.phase}`,
          );
        }
        if (p.stage === "Running" && !p.terminating && !c.terminated && this.d.supersessions) {
          if (!c.superseded && readNotice) {
            readNotice = false;
            const kept = await this.d.supersessions.read(c.token).catch(() => undefined);
            if (kept) c.superseded = kept;
          }
          if (c.superseded) {
            const ended = await this.stale.endSuperseded(c);
            if (ended !== "left") {
              // Terminated (or to try again): the next look is the API server's.
              armed.cancel();
              fromCache = false;
              if (ended === "retry") await sleepUnlessAborted(this.pollMs, c.signal);
              continue;
            }
          }
        }
        if (p.stage === "Running") {
          const note = `${p.message ?? ""}|${p.blockedByWindow}`;
          if (note !== lastRunning) {
            lastRunning = note;
            const moved = await this.move(c, {
              phase: unresolved ? undefined : "Running",
              ...(p.startedAt ? { startedAt: p.startedAt } : {}),
              ...(p.message ? { message: p.message } : {}),
            });
            if (!moved) {
              armed.cancel();
              return;
            }
            await c.report(unresolved ? "Unresolved" : "Running", {
              ...(p.blockedByWindow
                ? { reason: StatusReason.SyncWindow }
                : p.retrying
                  ? { reason: StatusReason.Retrying }
                  : {}),
              ...(p.message ? { message: p.message } : {}),
              ...(p.retry ? { retry: p.retry } : {}),
            });
          }
        }
        if ((p.stage === "Orphaned" || p.stage === "Absent") && unresolved) {
          armed.cancel();
          if (read.cached) {
            // A cache behind the server may not show our update yet: decided on the server's answer.
            fromCache = false;
            continue;
          }
          // Argo CD processes an operation only while `operation` is set: this one never ends.
          return this.complete(
            c,
            "Failed",
            StatusReason.OperationRemoved,
            "the Application's operation was removed before the sync completed; Argo CD will not finish it",
          );
        }
        if (!unresolved && now() - start >= this.budgetMs) {
          armed.cancel();
          unresolved = true;
          if (!(await this.move(c, { phase: "Unresolved" }))) return;
          await c.report("Unresolved", {
            message: `not completed after ${Math.round(this.budgetMs / 1000)} s`,
          });
          continue;
        }
        fromCache = await armed.wait;
        if (!fromCache) readNotice = true;
        if (unresolved) interval = backoffMs({ initialMs: this.pollMs, maxMs: this.maxPollMs }, ++waits);
      }
    } finally {
      if (this.following.get(c.token) === c) this.following.delete(c.token);
      this.d.windows?.close(c.token);
    }
  }

  /** The window opens before the update that starts the sync (Argo CD may apply before its answer). */
  private async openWindow(c: Ctx): Promise<void> {
    await this.d.windows?.open({
      token: c.token,
      claim: { kind: "ArgoCDClaim", namespace: c.claim.namespace, name: c.claim.name },
      branchKey: c.branchKey,
      applier: c.app,
      ...(c.missedSince ? { missedSince: c.missedSince } : {}),
    });
  }

  private record(c: Ctx): RecordOf {
    return recordOf(this.d.kube, this.d.now, c);
  }

  /** Moves the claim's record; false when the record is gone (the claim deleted or replaced). */
  private move(c: Ctx, change: OperationChange): Promise<boolean> {
    return moveRecord(this.record(c), change);
  }

  /**
   * Asks Argo CD to compare the Application with its branch resolved anew. After a sync started as
   * automated (ours are, so sync windows judge them as automated), the controller compares against
   * the branch as the repo-server last resolved it, cached for minutes: without this the UI shows
   * an application applygate just synced OutOfSync at an older commit. Best effort: the sync ended
   * either way.
   */
  private async compareAnew(c: Ctx): Promise<void> {
    try {
      await this.d.kube.mergePatch(APPLICATION, c.app.namespace, c.app.name, refreshPatch());
    } catch (err) {
      c.log.warn({ err: apiFailure(err).message }, "cannot ask Argo CD to compare the Application anew");
    }
  }

  private complete(
    c: Ctx,
    phase: "Succeeded" | "Failed" | "Superseded",
    reason: string | undefined,
    message: string,
  ): Promise<void> {
    return completeRecord(
      this.record(c),
      { phase, ...(reason ? { reason } : {}), message },
      { signal: c.signal, pollMs: this.pollMs },
    );
  }
}
