/**
 * The Flux applier's reads and writes: the Kustomization's spec.suspend and requestedAt by
 * server-side apply under our field manager, the GitRepository's requestedAt, and waits that wake
 * on a watch event of the object or a fallback re-read. `kustomization` and `source` read the API
 * server; `observedKustomization` and `observedSource` answer from the watch's cache while it runs
 * and holds the object (else they read the API server).
 */
import { randomBytes } from "node:crypto";
import { FIELD_MANAGER } from "../../queue/contract.js";
import {
  type InformerHandle,
  type KObject,
  type Kube,
  KubeError,
  retryOnConflict,
} from "../../queue/kube/index.js";
import type { Logger } from "../../queue/log.js";
import { Wakeups } from "../wakeups.js";
import { GIT_REPOSITORY, KUSTOMIZATION, keyOf, type ObjectKey, REQUESTED_AT } from "./resources.js";

/** A requestedAt token: the time first (as flux reconcile writes it), then a random tail so two never match. */
export function newToken(now: Date): string {
  return `${now.toISOString()}-${randomBytes(3).toString("hex")}`;
}

export class Aborted extends Error {
  override name = "Aborted";
}

export interface FluxClientOptions {
  log: Logger;
  /** Re-read at least this often while waiting, events or not (default 2 s). */
  pollMs?: number;
  /** The clock a wait's deadline is read on (the sidecar's, injected). */
  now?: () => Date;
}

export class FluxClient {
  readonly wakeups = new Wakeups();
  private handles: InformerHandle<KObject>[] = [];
  readonly pollMs: number;
  private readonly now: () => number;

  constructor(
    readonly kube: Kube,
    private readonly opts: FluxClientOptions,
  ) {
    this.pollMs = opts.pollMs ?? 2_000;
    const clock = opts.now ?? (() => new Date());
    this.now = () => clock().getTime();
  }

  /** Starts the watches that wake waiters (optional: without them waits fall back to re-reads). */
  async start(onKustomization?: (ks: KObject) => void): Promise<void> {
    if (this.handles.length) return;
    const ks = this.kube.informer(KUSTOMIZATION, {
      log: this.opts.log,
      onChange: (_t, o) => {
        this.wakeups.notify(ksWakeKey(objectKeyOf(o)));
        onKustomization?.(o);
      },
    });
    const src = this.kube.informer(GIT_REPOSITORY, {
      log: this.opts.log,
      onChange: (_t, o) => this.wakeups.notify(srcWakeKey(objectKeyOf(o))),
    });
    this.handles = [ks, src];
    await Promise.all(this.handles.map((h) => h.informer.start()));
  }

  async stop(): Promise<void> {
    await Promise.all(this.handles.map((h) => h.release()));
    this.handles = [];
  }

  kustomization(ref: ObjectKey): Promise<KObject | undefined> {
    return this.kube.get(KUSTOMIZATION, ref.namespace, ref.name);
  }

  source(ref: ObjectKey): Promise<KObject | undefined> {
    return this.kube.get(GIT_REPOSITORY, ref.namespace, ref.name);
  }

  /**
   * The Kustomization as the watch last delivered it: undefined while the watch is not running or
   * has not listed since its last failure, or does not hold the object (not delivered yet, or gone).
   */
  cachedKustomization(ref: ObjectKey): KObject | undefined {
    return this.cached(0, ref);
  }

  /** From the watch's cache when it holds the Kustomization, else read from the API server. */
  async observedKustomization(ref: ObjectKey): Promise<KObject | undefined> {
    return this.cachedKustomization(ref) ?? this.kustomization(ref);
  }

  /** From the watch's cache when it holds the GitRepository, else read from the API server. */
  async observedSource(ref: ObjectKey): Promise<KObject | undefined> {
    return this.cached(1, ref) ?? this.source(ref);
  }

  private cached(i: 0 | 1, ref: ObjectKey) {
    const h = this.handles[i];
    if (!h?.informer.isSynced()) return undefined;
    return h.informer.get(ref.name, ref.namespace);
  }

  /**
   * One server-side apply of spec.suspend (and requestedAt when a token is given) under our field
   * manager. `guard` carries uid and resourceVersion preconditions: a changed object is a 409, a
   * deleted one a 404, never re-created.
   */
  applySuspend(
    ref: ObjectKey,
    suspend: boolean,
    token: string | undefined,
    guard: { uid?: string; resourceVersion?: string } = {},
  ): Promise<KObject> {
    return this.kube.apply(
      KUSTOMIZATION,
      {
        apiVersion: `${KUSTOMIZATION.group}/${KUSTOMIZATION.version}`,
        kind: KUSTOMIZATION.kind,
        metadata: {
          name: ref.name,
          namespace: ref.namespace,
          ...(guard.uid ? { uid: guard.uid } : {}),
          ...(guard.resourceVersion ? { resourceVersion: guard.resourceVersion } : {}),
          ...(token ? { annotations: { [REQUESTED_AT]: token } } : {}),
        },
        spec: { suspend },
      },
      { fieldManager: FIELD_MANAGER, force: true },
    );
  }

  /**
   * Suspends with a token, guarded by the object just read so a deleted Kustomization is never
   * re-created; a conflict reads again (the shared conflict-retry policy). `from` is the
   * Kustomization as the caller just observed it: the first try is guarded by it instead of a read
   * (a change since is a 409 that reads again). Undefined when it is gone.
   */
  async suspend(ref: ObjectKey, token: string, from?: KObject): Promise<KObject | undefined> {
    let first = from;
    try {
      return await retryOnConflict(
        async () => {
          const given = first;
          first = undefined;
          return given ?? (await this.kustomization(ref));
        },
        (ks) => ks,
        (_ks, ks) =>
          this.applySuspend(ref, true, token, {
            uid: ks.metadata.uid,
            resourceVersion: ks.metadata.resourceVersion,
          }),
        { what: `suspend of Kustomization ${keyOf(ref)}` },
      );
    } catch (err) {
      if (err instanceof KubeError && err.code === 404) return undefined;
      throw err;
    }
  }

  /**
   * Gives spec.suspend back: first a forced `suspend: false` (so a field shared with a flux suspend's
   * Update entry is ours alone), then an empty apply that releases every field we own.
   */
  async release(ref: ObjectKey): Promise<KObject | undefined> {
    const ks = await this.kustomization(ref);
    if (!ks) return undefined;
    const guard = { uid: ks.metadata.uid, resourceVersion: ks.metadata.resourceVersion };
    await this.applySuspend(ref, false, undefined, guard);
    return this.kube.apply(
      KUSTOMIZATION,
      {
        apiVersion: `${KUSTOMIZATION.group}/${KUSTOMIZATION.version}`,
        kind: KUSTOMIZATION.kind,
        metadata: { name: ref.name, namespace: ref.namespace },
      },
      { fieldManager: FIELD_MANAGER, force: true },
    );
  }

  /** Stamps the GitRepository with a token, as `flux reconcile source git` does. */
  async stampSource(ref: ObjectKey, token: string): Promise<KObject> {
    return this.kube.mergePatch(GIT_REPOSITORY, ref.namespace, ref.name, {
      metadata: { annotations: { [REQUESTED_AT]: token } },
    });
  }

  /**
   * Re-reads with `read` until `check` returns a value, waking on watch events of `wakeKey` and at
   * least every `intervalMs(n)` (n = re-reads so far). Undefined once `deadline` (epoch ms, on the
   * injected clock) passes. `read` is told whether the watch's cache may answer: at the first read
   * and after an event, not after a wait that no event ended.
   */
  async until<T, R>(
    read: (fromCache: boolean) => Promise<T>,
    check: (value: T) => R | undefined,
    o: { wakeKey: string; signal?: AbortSignal; deadline?: number; intervalMs?: (n: number) => number },
  ): Promise<R | undefined> {
    let fromCache = true;
    for (let n = 0; ; n++) {
      if (o.signal?.aborted) throw new Aborted("stopping");
      const wait = o.intervalMs?.(n) ?? this.pollMs;
      const left = o.deadline !== undefined ? Math.max(0, o.deadline - this.now()) : wait;
      const armed = this.wakeups.arm(o.wakeKey, Math.min(wait, left), o.signal);
      let r: R | undefined;
      try {
        r = check(await read(fromCache));
      } catch (err) {
        armed.cancel();
        throw err;
      }
      if (r !== undefined || (o.deadline !== undefined && this.now() >= o.deadline)) {
        armed.cancel();
        return r;
      }
      fromCache = await armed.wait;
    }
  }
}

/** An object's namespace and name. */
const objectKeyOf = (o: { metadata: { namespace?: string; name: string } }): ObjectKey => ({
  namespace: o.metadata.namespace ?? "",
  name: o.metadata.name,
});

export const ksWakeKey = (ref: ObjectKey) => `ks:${keyOf(ref)}`;
export const srcWakeKey = (ref: ObjectKey) => `src:${keyOf(ref)}`;
