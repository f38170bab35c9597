/**
 * The application controller: one pass per Application at a time, from its watch, its timers and
 * the end of an operation. A pass processes the operation while `operation` is set
 * (processRequestedAppOperation), then refreshes when due and lets automated sync start an
 * operation. Every write goes through the API server, with the controller's user agent.
 */
import { isDeepStrictEqual } from "node:util";
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { type Clock, sleep, wireTime } from "../clock.js";
import { decideAutoSync, type SyncStatus } from "./automation.js";
import type { SyncEngine } from "./engine.js";
import { errorMessage, isConflict, isNotFound, MERGE, type ObjectClient, readOrUndefined } from "./kube.js";
import { REFRESH_ANNOTATION, TRACKING_ANNOTATION } from "./objects.js";
import {
  afterFailure,
  asWrittenByArgo,
  completed,
  inProgress,
  newOperationState,
  operationStatePatch,
  retryGate,
} from "./operation.js";
import type {
  Application,
  AppRef,
  InfoEntry,
  InitiatedBy,
  Operation,
  OperationState,
  SyncWindow,
} from "./types.js";
import { type Watcher, watchAll } from "./watch.js";
import { canSync, matchingWindows, SYNC_WINDOW_BLOCKED_MESSAGE } from "./windows.js";
import { WorkQueue } from "./workqueue.js";

export interface ArgoKnobs {
  /** Timed refresh (Argo CD's timeout.reconciliation; 3 minutes by default). */
  refreshIntervalMs: number;
  /** Time each object's write takes, before it is sent. */
  perObjectApplyMs: number;
  /** Time a sync attempt takes before its first write. */
  syncDelayMs: number;
  /**
   * How long the repo-server keeps a branch's resolution (--revision-cache-expiration, 3 minutes):
   * a timed refresh compares at it; a refresh request, a changed source or the end of a manual
   * sync resolves again.
   */
  revisionCacheMs: number;
}

export const DEFAULT_KNOBS: ArgoKnobs = {
  refreshIntervalMs: 180_000,
  perObjectApplyMs: 0,
  syncDelayMs: 0,
  revisionCacheMs: 180_000,
};

/** The info entry whose value syncs() reports as the operation's token. */
export const OPERATION_TOKEN_INFO = "applygate.dev/operation-token";

export interface SyncRecord {
  /** The commit the attempt applied. */
  revision: string;
  initiatedBy: InitiatedBy | undefined;
  token?: string;
  info?: InfoEntry[];
  startedAt: string;
  retryCount: number;
}

interface Hold {
  released: boolean;
}

const APP = { apiVersion: "argoproj.io/v1alpha1", kind: "Application" } as const;
const PROJECT = { apiVersion: "argoproj.io/v1alpha1", kind: "AppProject" } as const;
const key = (a: AppRef) => `${a.namespace}/${a.name}`;
const attemptOf = (s: OperationState) => `${s.startedAt}#${s.retryCount ?? 0}`;

export class AppController {
  readonly queue: WorkQueue;
  private readonly lastRefresh = new Map<string, number>();
  private readonly refreshRequested = new Set<string>();
  private readonly known = new Set<string>();
  private readonly failNext = new Map<string, ("Failed" | "Error")[]>();
  private readonly pendingHolds = new Map<string, Hold[]>();
  private readonly boundHolds = new Map<string, { attempt: string; hold: Hold }>();
  private readonly applied = new Map<string, string>();
  private readonly records = new Map<string, SyncRecord[]>();
  private readonly watchers: Watcher[] = [];
  private watching = true;
  /** Kinds whose objects are watched (Argo CD's cluster cache), by apiVersion/kind. */
  private readonly watchedKinds = new Set<string>();
  /** Applications a managed object of changed since their last refresh (CompareWithRecent). */
  private readonly recentRequested = new Set<string>();
  /** Refreshes that resolve the source's revision again (CompareWithLatestForceResolve). */
  private readonly resolveRequested = new Set<string>();
  /** The repo-server's revision cache: a source (repository and revision) resolved, and when. */
  private readonly resolved = new Map<string, { sha: string; at: number }>();

  constructor(
    private readonly d: {
      kc: KubeConfig;
      api: ObjectClient;
      engine: SyncEngine;
      clock: Clock;
      knobs: ArgoKnobs;
      log: Logger;
      controlNamespace: string;
      hasEnabledField: boolean;
    },
  ) {
    this.queue = new WorkQueue(
      d.clock,
      (k) => this.pass(k),
      (k, e) => {
        d.log.warn({ applier: k, err: errorMessage(e) }, "application pass failed; retrying");
      },
    );
  }

  start(): void {
    const onApp = (_t: string, o: { metadata?: { name?: string; namespace?: string } }) => {
      if (!o.metadata?.name || !o.metadata.namespace) return;
      const k = `${o.metadata.namespace}/${o.metadata.name}`;
      this.known.add(k);
      this.queue.add(k);
    };
    const onError = (e: unknown) => this.d.log.debug({ err: errorMessage(e) }, "watch ended");
    // AppProjects are read at each sync, never watched for the Applications: Argo CD's project
    // queue only finalizes deleted projects, so a lifted sync window runs a blocked operation at
    // the Application's next pass, not at the project's change.
    this.watchers.push(
      watchAll(this.d.kc, "/apis/argoproj.io/v1alpha1/applications", onApp, () => this.list(APP), onError),
    );
  }

  private async list(t: { apiVersion: string; kind: string }) {
    const l = await this.d.api.list(t.apiVersion, t.kind);
    return { resourceVersion: l.metadata?.resourceVersion, items: l.items };
  }

  async stop(): Promise<void> {
    this.watching = false;
    for (const w of this.watchers) w.stop();
    for (const { hold } of this.boundHolds.values()) hold.released = true;
    await this.queue.stop();
  }

  // ---- test controls ------------------------------------------------------------------------

  failNextSync(app: AppRef, phase: "Failed" | "Error" = "Failed"): void {
    const list = this.failNext.get(key(app)) ?? [];
    list.push(phase);
    this.failNext.set(key(app), list);
  }

  holdSync(app: AppRef): { release(): void } {
    const hold: Hold = { released: false };
    const list = this.pendingHolds.get(key(app)) ?? [];
    list.push(hold);
    this.pendingHolds.set(key(app), list);
    return {
      release: () => {
        hold.released = true;
        this.queue.add(key(app));
      },
    };
  }

  syncs(app: AppRef): SyncRecord[] {
    return structuredClone(this.records.get(key(app)) ?? []);
  }

  // ---- one pass -----------------------------------------------------------------------------

  private async pass(k: string): Promise<void> {
    const [namespace = "", name = ""] = k.split("/");
    let app = await readOrUndefined<Application & { apiVersion: string; kind: string }>(this.d.api, {
      ...APP,
      metadata: { name, namespace },
    });
    if (!app) {
      this.known.delete(k);
      this.lastRefresh.delete(k);
      return;
    }
    if (app.operation) {
      await this.processOperation(k, app);
      app = await readOrUndefined<Application & { apiVersion: string; kind: string }>(this.d.api, {
        ...APP,
        metadata: { name, namespace },
      });
      if (!app) return;
    }
    await this.refreshIfDue(k, app);
    this.watchManagedKinds();
  }

  /**
   * Argo CD's cluster cache watches the objects it manages: a change to one carrying an
   * Application's tracking annotation refreshes that Application at once, comparing with the
   * revision it compared last (CompareWithRecent), not the newest commit.
   */
  private watchManagedKinds(): void {
    for (const { apiVersion, kind } of this.d.engine.managedKinds()) {
      const id = `${apiVersion}/${kind}`;
      if (this.watchedKinds.has(id)) continue;
      this.watchedKinds.add(id);
      void this.d.api.collectionPath(apiVersion, kind).then(
        (path) => {
          if (!this.watching) return;
          this.watchers.push(
            watchAll(
              this.d.kc,
              path,
              (type, o) => {
                if (type === "LIST") return;
                const k = this.appOfTracking(
                  (o as { metadata?: { annotations?: Record<string, string> } }).metadata?.annotations?.[
                    TRACKING_ANNOTATION
                  ],
                );
                if (!k || !this.known.has(k)) return;
                this.recentRequested.add(k);
                this.queue.add(k);
              },
              async () => {
                const l = await this.d.api.list(apiVersion, kind);
                return { resourceVersion: l.metadata?.resourceVersion, items: l.items };
              },
              (e) => this.d.log.debug({ err: errorMessage(e) }, "watch ended"),
            ),
          );
        },
        (e) => {
          this.watchedKinds.delete(id);
          this.d.log.debug({ err: errorMessage(e), kind: id }, "cannot watch kind");
        },
      );
    }
  }

  /** The Application key of a tracking id (`<instance>:<group>/<kind>:<ns>/<name>`). */
  private appOfTracking(id: string | undefined): string | undefined {
    const instance = id?.split(":")[0];
    if (!instance) return undefined;
    const at = instance.indexOf("_");
    return at < 0
      ? `${this.d.controlNamespace}/${instance}`
      : `${instance.slice(0, at)}/${instance.slice(at + 1)}`;
  }

  private async processOperation(k: string, app: Application): Promise<void> {
    const log = this.d.log.child({ applier: k });
    const now = this.d.clock.now();
    const stored = app.status?.operationState;
    let state: OperationState;
    if (inProgress(stored)) {
      state = structuredClone(stored);
      if (state.phase === "Running" && state.finishedAt) {
        const gate = retryGate(state, now);
        if ("wait" in gate) {
          this.queue.addAfter(k, gate.wait);
          return;
        }
        state = gate.retry;
        log.info({ retryCount: state.retryCount }, state.message);
        app = await this.setOperationState(app, state);
      }
    } else {
      state = newOperationState(app.operation as Operation, now);
      log.info({ token: tokenOf(state.operation.info) }, "initialized new operation");
      app = await this.setOperationState(app, state);
    }
    const terminating = state.phase === "Terminating";

    try {
      const project = await this.project(app);
      await this.syncAppState(k, app, project, state);
    } catch (e) {
      state.phase = "Error";
      state.message = errorMessage(e);
    }

    if (state.phase === "Running") {
      // Someone may have asked to terminate while this pass ran: do not write Running over it.
      const fresh = await readOrUndefined<Application>(this.d.api, { ...APP, metadata: app.metadata });
      if (fresh?.status?.operationState?.phase === "Terminating") {
        state.phase = "Terminating";
        state.message = "operation is terminating";
        this.queue.add(k);
      }
    } else if (state.phase === "Failed" || state.phase === "Error") {
      state = afterFailure(state, terminating, this.d.clock.now());
      if (state.phase === "Running" && state.finishedAt)
        this.queue.addAfter(k, Date.parse(state.finishedAt) + 1 - this.d.clock.now());
    }
    await this.setOperationState(app, state);
    if (completed(state.phase)) {
      log.info({ phase: state.phase, commit: state.syncResult?.revision }, `operation ${state.phase}`);
      this.refreshRequested.add(k);
      // Automated operations do not force a resolution (too many ls-remote on monorepos).
      if (!state.operation.initiatedBy?.automated) this.resolveRequested.add(k);
      this.queue.add(k);
    }
  }

  /** SyncAppState: window check, termination, then one step of the sync. */
  private async syncAppState(k: string, app: Application, project: ProjectSpec, state: OperationState) {
    const op = state.operation.sync;
    if (!op) {
      state.phase = "Error";
      state.message = "Invalid operation request: no operation specified";
      return;
    }
    const source = op.source ?? app.spec.source;
    state.syncResult ??= { revision: op.revision ?? "", ...(source ? { source } : {}) };

    const windows = matchingWindows(project.syncWindows ?? [], app);
    const isManual = !state.operation.initiatedBy?.automated;
    if (!canSync(windows, isManual, this.d.clock.now())) {
      if (state.phase === "Running") state.message = SYNC_WINDOW_BLOCKED_MESSAGE;
      this.queue.addAfter(k, this.d.knobs.refreshIntervalMs);
      return;
    }

    const attempt = attemptOf(state);
    if (state.phase === "Terminating") {
      this.boundHolds.delete(k);
      this.applied.delete(k);
      state.phase = "Failed";
      state.message = "Operation terminated";
      return;
    }
    if (this.applied.get(k) === attempt) {
      this.applied.delete(k);
      state.phase = "Succeeded";
      state.message = "successfully synced (all tasks run)";
      if (!op.dryRun && !op.resources?.length) await this.persistHistory(app, state);
      return;
    }

    // A held attempt stays Running, applying nothing, until released.
    let bound = this.boundHolds.get(k);
    if (bound && bound.attempt !== attempt) {
      this.boundHolds.delete(k);
      bound = undefined;
    }
    if (!bound) {
      const next = this.pendingHolds.get(k)?.shift();
      if (next) this.boundHolds.set(k, (bound = { attempt, hold: next }));
    }
    if (bound && !bound.hold.released) return;
    this.boundHolds.delete(k);

    const fail = this.failNext.get(k)?.shift();
    if (fail) {
      state.phase = fail;
      state.message =
        fail === "Failed"
          ? "one or more objects failed to apply, reason: failure injected by argosim"
          : "error injected by argosim";
      return;
    }

    if (!source) throw new Error("application has no source");
    const rendered = await this.d.engine.render(app, source, op.revision);
    state.syncResult.revision = rendered.sha;
    state.syncResult.source = source;
    if (this.d.knobs.syncDelayMs > 0) await sleep(this.d.clock, this.d.knobs.syncDelayMs);
    this.record(k, state, rendered.sha);
    if (rendered.resources.length === 0 && rendered.hooks.length === 0) {
      state.syncResult.resources = [];
      state.phase = "Succeeded";
      state.message = "successfully synced (no manifests)";
      await this.persistHistory(app, state);
      return;
    }
    const { results, failed } = await this.d.engine.sync(app, rendered, {
      syncOptions: op.syncOptions,
      prune: op.prune === true,
      only: op.resources,
    });
    state.syncResult.resources = results;
    if (failed) {
      state.phase = "Failed";
      state.message = `one or more objects failed to apply, reason: ${failed}`;
      return;
    }
    // The writes are done; the next pass completes the operation (Argo CD's second pass).
    this.applied.set(k, attempt);
    this.queue.add(k);
  }

  private record(k: string, state: OperationState, revision: string) {
    const list = this.records.get(k) ?? [];
    const token = tokenOf(state.operation.info);
    list.push({
      revision,
      initiatedBy: state.operation.initiatedBy,
      ...(token !== undefined ? { token } : {}),
      ...(state.operation.info ? { info: state.operation.info } : {}),
      startedAt: state.startedAt,
      retryCount: state.retryCount ?? 0,
    });
    this.records.set(k, list);
  }

  private async persistHistory(app: Application, state: OperationState) {
    const history = (app.status?.history ?? []) as { id?: number }[];
    const id = history.reduce((m, h) => Math.max(m, h.id ?? 0), -1) + 1;
    const entry = {
      id,
      revision: state.syncResult?.revision,
      deployedAt: wireTime(this.d.clock.now()),
      deployStartedAt: state.startedAt,
      source: state.syncResult?.source,
      initiatedBy: state.operation.initiatedBy ?? {},
    };
    const limit = (app.spec as { revisionHistoryLimit?: number }).revisionHistoryLimit ?? 10;
    const next = [...history, entry].slice(-Math.max(limit, 1));
    await this.patchApp(app, { status: { history: next } });
  }

  private async setOperationState(app: Application, state: OperationState): Promise<Application> {
    if (isDeepStrictEqual(app.status?.operationState, state)) return app;
    const patch = operationStatePatch(app.status?.operationState, state, this.d.clock.now());
    return this.patchApp(app, patch);
  }

  private async patchApp(app: Application, patch: Record<string, unknown>): Promise<Application> {
    const body = {
      ...patch,
      ...APP,
      metadata: { name: app.metadata.name, namespace: app.metadata.namespace },
    };
    if (patch.metadata) body.metadata = { ...(patch.metadata as object), ...body.metadata };
    return (await this.d.api.patch(
      body as never,
      undefined,
      undefined,
      undefined,
      undefined,
      MERGE,
    )) as Application;
  }

  private async project(app: Application): Promise<ProjectSpec> {
    const name = app.spec.project || "default";
    const proj = await readOrUndefined<{ spec?: ProjectSpec }>(this.d.api, {
      ...PROJECT,
      metadata: { name, namespace: this.d.controlNamespace },
    });
    if (proj) return proj.spec ?? {};
    if (name === "default") return {};
    throw new Error(`Failed to load application project: appproject.argoproj.io "${name}" not found`);
  }

  // ---- refresh and automated sync -----------------------------------------------------------

  private async refreshIfDue(k: string, app: Application): Promise<void> {
    const now = this.d.clock.now();
    const interval = this.d.knobs.refreshIntervalMs;
    const last = this.lastRefresh.get(k);
    const annotated = app.metadata.annotations?.[REFRESH_ANNOTATION] !== undefined;
    const comparedTo = { source: app.spec.source, destination: app.spec.destination };
    const latest =
      annotated ||
      last === undefined ||
      now - last >= interval ||
      this.refreshRequested.has(k) ||
      !isDeepStrictEqual(app.status?.sync?.comparedTo, comparedTo);
    const recent = app.status?.sync?.revision || undefined;
    if (!latest && !(this.recentRequested.has(k) && recent)) {
      this.recentRequested.delete(k);
      this.queue.addAfter(k, last + interval - now);
      return;
    }
    const forceResolve =
      annotated ||
      last === undefined ||
      this.resolveRequested.has(k) ||
      !isDeepStrictEqual(app.status?.sync?.comparedTo, comparedTo);
    this.recentRequested.delete(k);
    this.refreshRequested.delete(k);
    this.resolveRequested.delete(k);
    this.lastRefresh.set(k, now);
    this.queue.addAfter(k, interval);

    const source = `${app.spec.source?.repoURL ?? ""}|${app.spec.source?.targetRevision ?? ""}`;
    const cached = this.resolved.get(source);
    const fresh = cached && now - cached.at < this.d.knobs.revisionCacheMs ? cached.sha : undefined;
    let sync: SyncStatus | undefined;
    let error: string | undefined;
    try {
      sync = await this.d.engine.compare(app, latest ? (forceResolve ? undefined : fresh) : recent);
      if (latest && (forceResolve || !fresh)) this.resolved.set(source, { sha: sync.revision, at: now });
    } catch (e) {
      error = errorMessage(e);
    }
    const status: Record<string, unknown> = {
      sync: { status: sync?.status ?? "Unknown", revision: sync?.revision ?? "", comparedTo },
      health: {
        status: !sync ? "Unknown" : sync.outOfSync.some((r) => !r.requiresPruning) ? "Missing" : "Healthy",
      },
      reconciledAt: wireTime(now),
      conditions: error
        ? [{ type: "ComparisonError", message: error, lastTransitionTime: wireTime(now) }]
        : null,
    };
    const patch: Record<string, unknown> = { status };
    // The refresh annotation is removed once the refresh it asked for is done.
    if (annotated) patch.metadata = { annotations: { [REFRESH_ANNOTATION]: null } };
    const updated = await this.patchApp(app, patch);
    if (!sync) return;
    const decision = decideAutoSync(updated, sync, this.d.hasEnabledField);
    if ("skip" in decision) {
      this.d.log.debug({ applier: k, reason: decision.skip }, "skipping auto-sync");
      return;
    }
    await this.setAppOperation(app, decision.start);
    this.d.log.info({ applier: k, commit: sync.revision }, `initiated automated sync to '${sync.revision}'`);
    this.queue.add(k);
  }

  /** SetAppOperation: never over a set operation; the same update clears operationState. */
  private async setAppOperation(ref: Application, op: Operation): Promise<void> {
    for (;;) {
      const app = await readOrUndefined<Application & { apiVersion: string; kind: string }>(this.d.api, {
        ...APP,
        metadata: { name: ref.metadata.name, namespace: ref.metadata.namespace },
      });
      if (!app || app.operation) return;
      app.operation = asWrittenByArgo(op);
      if (app.status) delete app.status.operationState;
      try {
        await this.d.api.replace(app as never);
        return;
      } catch (e) {
        if (!isConflict(e)) throw e;
      }
    }
  }
}

interface ProjectSpec {
  syncWindows?: SyncWindow[];
}

function tokenOf(info: InfoEntry[] | undefined): string | undefined {
  return info?.find((i) => i.name === OPERATION_TOKEN_INFO)?.value;
}

export { isNotFound };
