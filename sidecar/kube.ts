/**
 * Small typed helpers over @kubernetes/client-node 1.4: read, list, watch (an informer that
 * restarts itself), server-side apply, merge patches with a resourceVersion precondition, and
 * retry on conflict. Every other sidecar module talks to the API server through these.
 */
import * as k8s from "@kubernetes/client-node";
import { FIELD_MANAGER } from "../queue/contract.js";
import {
  APPLIER_GRANT_PLURAL,
  ARGOCD_CLAIM_PLURAL,
  FLUX_CLAIM_PLURAL,
  GIT_PROVIDER_PLURAL,
  GIT_TARGET_PLURAL,
  GROUP,
  VERSION,
} from "../queue/crds/index.js";
import type { Logger } from "../queue/log.js";

/** A resource served under /apis/<group>/<version>/…/<plural> (custom resources and grouped built-ins). */
export interface ResourceType {
  group: string;
  version: string;
  plural: string;
  kind: string;
}

export const RESOURCES = {
  gitProvider: { group: GROUP, version: VERSION, plural: GIT_PROVIDER_PLURAL, kind: "GitProvider" },
  gitTarget: { group: GROUP, version: VERSION, plural: GIT_TARGET_PLURAL, kind: "GitTarget" },
  fluxClaim: { group: GROUP, version: VERSION, plural: FLUX_CLAIM_PLURAL, kind: "FluxClaim" },
  argoCDClaim: { group: GROUP, version: VERSION, plural: ARGOCD_CLAIM_PLURAL, kind: "ArgoCDClaim" },
  applierGrant: { group: GROUP, version: VERSION, plural: APPLIER_GRANT_PLURAL, kind: "ApplierGrant" },
} as const satisfies Record<string, ResourceType>;

/** An object as the API server returns it; the kind modules narrow it with their zod schemas. */
export interface KObject {
  apiVersion?: string;
  kind?: string;
  metadata: k8s.V1ObjectMeta & { name: string };
  spec?: unknown;
  status?: unknown;
  [key: string]: unknown;
}

// ---------------------------------------------------------------------------------------------
// Errors

/** The parts of a failed call we act on. In 1.4.0 `ApiException.body` may be a JSON string. */
export interface ApiFailure {
  code?: number;
  reason?: string;
  message: string;
  causes?: { reason?: string; message?: string; field?: string }[];
}

export function apiFailure(err: unknown): ApiFailure {
  const e = err as { code?: unknown; body?: unknown; message?: unknown };
  let body: unknown = e?.body;
  if (typeof body === "string") {
    try {
      body = JSON.parse(body);
    } catch {
      // not JSON: keep the text as the message
    }
  }
  const status = (typeof body === "object" && body !== null ? body : {}) as {
    code?: number;
    reason?: string;
    message?: string;
    details?: { causes?: ApiFailure["causes"] };
  };
  const code = typeof e?.code === "number" ? e.code : status.code;
  const message =
    status.message ??
    (typeof body === "string" && body !== ""
      ? body
      : typeof e?.message === "string"
        ? e.message
        : String(err));
  return {
    ...(code !== undefined ? { code } : {}),
    ...(status.reason ? { reason: status.reason } : {}),
    message,
    ...(status.details?.causes ? { causes: status.details.causes } : {}),
  };
}

// These read a KubeError's code as well as a client's ApiException.
export const isNotFound = (err: unknown) => apiFailure(err).code === 404;
export const isConflict = (err: unknown) => apiFailure(err).code === 409;
export const isForbidden = (err: unknown) => apiFailure(err).code === 403;

/** Thrown by helpers for a failed call, with the parsed status attached and a readable message. */
export class KubeError extends Error {
  override name = "KubeError";
  constructor(
    readonly what: string,
    readonly failure: ApiFailure,
  ) {
    super(`${what}: ${failure.code ?? "?"} ${failure.reason ?? ""} ${failure.message}`.replace(/\s+/g, " "));
  }
  get code() {
    return this.failure.code;
  }
}

// ---------------------------------------------------------------------------------------------
// Retry on conflict

export interface RetryOptions {
  /** Attempts in all, the first included (default 5). */
  max?: number;
  /** Pause before attempt n (n ≥ 2); default 20 ms × 2^(n-2), jittered. */
  backoffMs?: (attempt: number) => number;
  sleep?: (ms: number) => Promise<void>;
}

export class ConflictRetriesExhausted extends Error {
  override name = "ConflictRetriesExhausted";
}

const defaultSleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const defaultBackoff = (attempt: number) => {
  const base = 20 * 2 ** (attempt - 2);
  return base / 2 + Math.random() * base;
};

/**
 * Reads, computes, writes; a 409 reads again and recomputes. `mutate` may return undefined to
 * write nothing (the result is then `undefined`). A lost race never wedges: after `max` conflicts
 * it throws ConflictRetriesExhausted, which callers treat as "try again on the next pass".
 */
export async function retryOnConflict<S, W, R>(
  read: () => Promise<S>,
  mutate: (current: S) => W | undefined,
  write: (current: S, change: W) => Promise<R>,
  opts: RetryOptions = {},
): Promise<R | undefined> {
  const max = opts.max ?? 5;
  const sleep = opts.sleep ?? defaultSleep;
  const backoff = opts.backoffMs ?? defaultBackoff;
  for (let attempt = 1; ; attempt++) {
    if (attempt > 1) await sleep(backoff(attempt));
    const current = await read();
    const change = mutate(current);
    if (change === undefined) return undefined;
    try {
      return await write(current, change);
    } catch (err) {
      if (!isConflict(err)) throw err;
      if (attempt >= max) throw new ConflictRetriesExhausted(`still conflicting after ${max} attempts`);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The client

const MERGE = k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch);
const APPLY = k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.ServerSideApply);

export interface ApplyOptions {
  fieldManager?: string;
  /** Take fields other managers own (default true: we apply only fields we are meant to own). */
  force?: boolean;
  dryRun?: boolean;
}

export interface PatchOptions {
  /** Write through the status subresource. */
  status?: boolean;
  /** Sent as metadata.resourceVersion: a mismatch is a 409. */
  resourceVersion?: string;
  fieldManager?: string;
}

const ref = (t: ResourceType, namespace: string, name: string) =>
  `${t.plural}.${t.group} ${namespace}/${name}`;

export class Kube {
  readonly custom: k8s.CustomObjectsApi;
  readonly objects: k8s.KubernetesObjectApi;
  readonly events: k8s.EventsV1Api;
  readonly core: k8s.CoreV1Api;

  /** Every running watch made through this client: readiness needs each of them synced. */
  private readonly watches = new Set<Watcher<KObject>>();

  constructor(readonly kubeConfig: k8s.KubeConfig) {
    this.custom = kubeConfig.makeApiClient(k8s.CustomObjectsApi);
    this.objects = k8s.KubernetesObjectApi.makeApiClient(kubeConfig);
    this.events = kubeConfig.makeApiClient(k8s.EventsV1Api);
    this.core = kubeConfig.makeApiClient(k8s.CoreV1Api);
  }

  /** The object, or undefined when it does not exist. Always uncached. */
  async get<T = KObject>(t: ResourceType, namespace: string, name: string): Promise<T | undefined> {
    try {
      return (await this.custom.getNamespacedCustomObject({
        group: t.group,
        version: t.version,
        namespace,
        plural: t.plural,
        name,
      })) as T;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw new KubeError(`get ${ref(t, namespace, name)}`, apiFailure(err));
    }
  }

  /** Every object of a type, in one namespace or (namespace undefined) in all. */
  async list<T = KObject>(
    t: ResourceType,
    namespace?: string,
    labelSelector?: string,
  ): Promise<{ items: T[]; resourceVersion: string }> {
    try {
      const base = { group: t.group, version: t.version, plural: t.plural, labelSelector };
      const res = (
        namespace === undefined
          ? await this.custom.listClusterCustomObject(base)
          : await this.custom.listNamespacedCustomObject({ ...base, namespace })
      ) as { items: T[]; metadata?: { resourceVersion?: string } };
      return { items: res.items ?? [], resourceVersion: res.metadata?.resourceVersion ?? "" };
    } catch (err) {
      throw new KubeError(`list ${t.plural}.${t.group}`, apiFailure(err));
    }
  }

  /**
   * Server-side apply of `obj` (apiVersion, kind, metadata.name/namespace and only the fields we
   * own). Put metadata.uid / metadata.resourceVersion in it for preconditions.
   */
  async apply<T = KObject>(t: ResourceType, obj: KObject, opts: ApplyOptions = {}): Promise<T> {
    const namespace = obj.metadata.namespace ?? "";
    try {
      return (await this.custom.patchNamespacedCustomObject(
        {
          group: t.group,
          version: t.version,
          namespace,
          plural: t.plural,
          name: obj.metadata.name,
          body: obj,
          fieldManager: opts.fieldManager ?? FIELD_MANAGER,
          force: opts.force ?? true,
          ...(opts.dryRun ? { dryRun: "All" } : {}),
        },
        APPLY,
      )) as T;
    } catch (err) {
      throw new KubeError(`apply ${ref(t, namespace, obj.metadata.name)}`, apiFailure(err));
    }
  }

  /** JSON merge patch of the object or (opts.status) its status, optionally guarded by resourceVersion. */
  async mergePatch<T = KObject>(
    t: ResourceType,
    namespace: string,
    name: string,
    patch: Record<string, unknown>,
    opts: PatchOptions = {},
  ): Promise<T> {
    const body = opts.resourceVersion
      ? {
          ...patch,
          metadata: {
            ...((patch.metadata as Record<string, unknown>) ?? {}),
            resourceVersion: opts.resourceVersion,
          },
        }
      : patch;
    const req = {
      group: t.group,
      version: t.version,
      namespace,
      plural: t.plural,
      name,
      body,
      fieldManager: opts.fieldManager ?? FIELD_MANAGER,
    };
    try {
      return (
        opts.status
          ? await this.custom.patchNamespacedCustomObjectStatus(req, MERGE)
          : await this.custom.patchNamespacedCustomObject(req, MERGE)
      ) as T;
    } catch (err) {
      throw new KubeError(
        `patch ${opts.status ? "status of " : ""}${ref(t, namespace, name)}`,
        apiFailure(err),
      );
    }
  }

  /** Merge patch of `status` through the status subresource, guarded by the resourceVersion read. */
  patchStatus<T = KObject>(
    t: ResourceType,
    namespace: string,
    name: string,
    status: Record<string, unknown>,
    resourceVersion: string | undefined,
  ): Promise<T> {
    return this.mergePatch<T>(t, namespace, name, { status }, { status: true, resourceVersion });
  }

  /** Replaces the whole object (an update guarded by the resourceVersion it carries). */
  async replace<T = KObject>(t: ResourceType, obj: KObject): Promise<T> {
    const namespace = obj.metadata.namespace ?? "";
    try {
      return (await this.custom.replaceNamespacedCustomObject({
        group: t.group,
        version: t.version,
        namespace,
        plural: t.plural,
        name: obj.metadata.name,
        body: obj,
        fieldManager: FIELD_MANAGER,
      })) as T;
    } catch (err) {
      throw new KubeError(`update ${ref(t, namespace, obj.metadata.name)}`, apiFailure(err));
    }
  }

  /** Deletes; a missing object is not an error. */
  async delete(t: ResourceType, namespace: string, name: string): Promise<void> {
    try {
      await this.custom.deleteNamespacedCustomObject({
        group: t.group,
        version: t.version,
        namespace,
        plural: t.plural,
        name,
      });
    } catch (err) {
      if (isNotFound(err)) return;
      throw new KubeError(`delete ${ref(t, namespace, name)}`, apiFailure(err));
    }
  }

  /** Adds (or removes) a finalizer, guarded by the resourceVersion of the object passed in. */
  async setFinalizer<T = KObject>(
    t: ResourceType,
    obj: KObject,
    finalizer: string,
    present: boolean,
  ): Promise<T> {
    const current = obj.metadata.finalizers ?? [];
    const next = present
      ? current.includes(finalizer)
        ? current
        : [...current, finalizer]
      : current.filter((f) => f !== finalizer);
    return this.mergePatch<T>(
      t,
      obj.metadata.namespace ?? "",
      obj.metadata.name,
      { metadata: { finalizers: next } },
      { resourceVersion: obj.metadata.resourceVersion },
    );
  }

  /** A watch of one type (all namespaces, or one) kept alive across errors. */
  watch<T extends KObject>(t: ResourceType, opts: WatchOptions<T> = {}): Watcher<T> {
    const path = opts.namespace
      ? `/apis/${t.group}/${t.version}/namespaces/${opts.namespace}/${t.plural}`
      : `/apis/${t.group}/${t.version}/${t.plural}`;
    const listFn = async () => {
      const { items, resourceVersion } = await this.list<T>(t, opts.namespace, opts.labelSelector);
      return {
        apiVersion: `${t.group}/${t.version}`,
        kind: `${t.kind}List`,
        metadata: { resourceVersion },
        items,
      } as k8s.KubernetesListObject<T & k8s.KubernetesObject>;
    };
    return this.tracked(new Watcher<T>(this.kubeConfig, path, listFn, opts));
  }

  /** Counts the watch in `unsyncedWatches` until it stops. */
  tracked<T extends KObject>(w: Watcher<T>): Watcher<T> {
    const any = w as unknown as Watcher<KObject>;
    this.watches.add(any);
    w.onStop(() => this.watches.delete(any));
    return w;
  }

  /** Paths of the running watches whose last list did not land (not yet, or failing since). */
  unsyncedWatches(): string[] {
    return [...this.watches].filter((w) => !w.isSynced()).map((w) => w.path);
  }
}

// ---------------------------------------------------------------------------------------------
// Watching

export interface WatchOptions<T> {
  namespace?: string;
  labelSelector?: string;
  /** Called for add, update and delete (and for re-list updates: handlers must be idempotent). */
  onChange?: (type: "add" | "update" | "delete", obj: T) => void;
  log?: Logger;
  /** Restart delay after the n-th consecutive error (default 200 ms doubling to 30 s). */
  backoffMs?: (failures: number) => number;
}

/**
 * An informer that restarts itself. In client-node 1.4 an informer stops on any error other than
 * 410 and never comes back; `stop()` itself raises an error, so restarts are guarded by `stopped`.
 */
export class Watcher<T extends KObject> {
  private readonly informer: k8s.Informer<T & k8s.KubernetesObject> &
    k8s.ObjectCache<T & k8s.KubernetesObject>;
  private stopped = false;
  private failures = 0;
  private timer: NodeJS.Timeout | undefined;
  private synced = false;
  /** True from a failed list or watch until the restarted list lands again. */
  private failing = false;
  private readonly waiters: (() => void)[] = [];
  private readonly stopHooks: (() => void)[] = [];

  constructor(
    kc: k8s.KubeConfig,
    readonly path: string,
    listFn: k8s.ListPromise<T & k8s.KubernetesObject>,
    private readonly opts: WatchOptions<T>,
  ) {
    this.informer = k8s.makeInformer(kc, path, listFn, opts.labelSelector);
    const emit = (type: "add" | "update" | "delete") => (obj: T & k8s.KubernetesObject) => {
      this.failures = 0;
      opts.onChange?.(type, obj);
    };
    this.informer.on("add", emit("add"));
    this.informer.on("update", emit("update"));
    this.informer.on("delete", emit("delete"));
    this.informer.on("connect", () => {
      this.failures = 0;
    });
    this.informer.on("error", (err) => {
      this.errors++;
      this.restartLater(err);
    });
  }

  /** Errors seen so far: the informer's start() resolves even when its list failed. */
  private errors = 0;

  async start(): Promise<void> {
    const errorsBefore = this.errors;
    try {
      await this.informer.start();
      // client-node reports a failed list as an error event and resolves start() all the same:
      // synced only when no error came during this start.
      if (this.errors === errorsBefore) this.markSynced();
    } catch (err) {
      this.restartLater(err);
    }
  }

  /** Whether the cache holds a list that landed and no failure came since. */
  isSynced(): boolean {
    return this.synced && !this.failing;
  }

  onStop(hook: () => void): void {
    this.stopHooks.push(hook);
  }

  /** Resolves once the first list has landed in the cache. */
  whenSynced(): Promise<void> {
    if (this.synced) return Promise.resolve();
    return new Promise((r) => this.waiters.push(r));
  }

  list(): T[] {
    return this.informer.list() as T[];
  }

  get(name: string, namespace?: string): T | undefined {
    return this.informer.get(name, namespace) as T | undefined;
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const hook of this.stopHooks.splice(0)) hook();
    if (this.timer) clearTimeout(this.timer);
    try {
      await this.informer.stop();
    } catch {
      // stopping aborts the request, which the informer reports as an error: expected
    }
  }

  private markSynced() {
    this.failing = false;
    if (this.synced) return;
    this.synced = true;
    for (const w of this.waiters.splice(0)) w();
  }

  private restartLater(err: unknown) {
    if (this.stopped || this.timer) return;
    this.failing = true;
    this.failures++;
    const delay = (this.opts.backoffMs ?? ((n) => Math.min(30_000, 200 * 2 ** (n - 1))))(this.failures);
    this.opts.log?.warn(
      { path: this.path, err: apiFailure(err).message, delayMs: delay },
      "watch failed; restarting",
    );
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (this.stopped) return;
      void this.start();
    }, delay);
    this.timer.unref?.();
  }
}
