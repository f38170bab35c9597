/**
 * An informer: a cache of one collection kept in step by list + watch, as kubectl and client-go's
 * reflector do. A watch that ends cleanly re-watches from the last resourceVersion seen (bookmarks
 * included); one answered 410 Gone (the version is older than the server's history) lists again
 * and diffs the list against the cache, so handlers see the adds, updates and deletes they missed;
 * any other failure retries after a backoff. Handlers get the object as cached before the event,
 * which the window observers need (the managedFields before a write are its proof).
 *
 * `Informers` shares one informer per collection in a process: every acquirer of the same path
 * gets the same cache, started and listed once, stopped when the last one releases it.
 */
import * as k8s from "@kubernetes/client-node";
import { backoffMs } from "../backoff.js";
import { errorMessage } from "../errors.js";
import type { Logger } from "../log.js";
import { apiFailure } from "./errors.js";
import { type KObject, objectKey } from "./resources.js";

export type InformerEvent = "add" | "update" | "delete";
/** Called for add, update and delete, also for those a relist finds: handlers must be idempotent. */
export type InformerHandler<T> = (type: InformerEvent, obj: T, previous: T | undefined) => void;

export interface InformerSource<T> {
  /** The collection path watched (`/apis/<group>/<version>[/namespaces/<ns>]/<plural>`). */
  path: string;
  labelSelector?: string;
  /** e.g. `metadata.name=creds`: one object watched by name (a Secret), never its whole namespace. */
  fieldSelector?: string;
  list(): Promise<{ items: T[]; resourceVersion: string }>;
  /**
   * What is kept of each object listed or watched, before it is cached and handlers see it (the
   * fields a user reads, so a cache of large objects stays small), named by `view`: informers of
   * one path with different views are different caches.
   */
  transform?: (obj: T) => T;
  view?: string;
}

export interface InformerOptions {
  log?: Logger;
  /** Delay before retrying after the n-th consecutive failure (default 200 ms doubling to 30 s). */
  backoffMs?: (failures: number) => number;
}

const defaultBackoff = (n: number) => backoffMs({ initialMs: 200, maxMs: 30_000 }, n);

export class Informer<T extends KObject = KObject> {
  private store = new Map<string, T>();
  private readonly handlers = new Set<InformerHandler<T>>();
  private resourceVersion = "";
  private starting: Promise<void> | undefined;
  private synced = false;
  private failing = false;
  private stopped = false;
  private failures = 0;
  private timer: NodeJS.Timeout | undefined;
  private request: AbortController | undefined;
  /** Bumped for every watch started: a late callback of an earlier one is ignored. */
  private generation = 0;
  private readonly waiters: (() => void)[] = [];
  /** Lists made (the first and every relist), for tests and logs. */
  lists = 0;
  /** The failure that keeps the cache out of step (a 403, a 404 kind), until a list lands again. */
  lastError: unknown;

  constructor(
    private readonly kc: k8s.KubeConfig,
    readonly source: InformerSource<T>,
    private readonly opts: InformerOptions = {},
  ) {}

  get path(): string {
    return this.source.path;
  }

  /** Adds a handler; returns the function that removes it. */
  on(handler: InformerHandler<T>): () => void {
    this.handlers.add(handler);
    return () => this.handlers.delete(handler);
  }

  /**
   * Starts once: resolves after the first list (landed or failed; a failed one keeps retrying).
   * Every later call answers the same promise.
   */
  start(): Promise<void> {
    this.starting ??= this.run();
    return this.starting;
  }

  /** Resolves once a list has landed in the cache. */
  whenSynced(): Promise<void> {
    if (this.synced) return Promise.resolve();
    return new Promise((r) => this.waiters.push(r));
  }

  /** Whether a list has ever landed: the cache holds one (perhaps out of step since a failure). */
  hasSynced(): boolean {
    return this.synced;
  }

  /** Whether the cache holds a list that landed and no failure came since. */
  isSynced(): boolean {
    return this.synced && !this.failing;
  }

  list(namespace?: string): T[] {
    const all = [...this.store.values()];
    return namespace === undefined ? all : all.filter((o) => (o.metadata.namespace ?? "") === namespace);
  }

  get(name: string, namespace?: string): T | undefined {
    return this.store.get(`${namespace ?? ""}/${name}`);
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.request?.abort();
    this.request = undefined;
  }

  private async run(): Promise<void> {
    if (this.stopped) return;
    if (!this.resourceVersion && !(await this.relist())) return;
    await this.watch();
  }

  /** Lists and diffs the list against the cache; false (and a retry scheduled) when it failed. */
  private async relist(): Promise<boolean> {
    let listed: { items: T[]; resourceVersion: string };
    try {
      this.lists++;
      listed = await this.source.list();
    } catch (err) {
      this.fail(err);
      return false;
    }
    if (this.stopped) return false;
    const next = new Map<string, T>();
    const keep = this.source.transform ?? ((o: T) => o);
    for (const item of listed.items) next.set(objectKey(item), keep(item));
    const before = this.store;
    this.store = next;
    for (const [key, obj] of next) {
      const previous = before.get(key);
      if (!previous) this.emit("add", obj, undefined);
      else if (previous.metadata.resourceVersion !== obj.metadata.resourceVersion)
        this.emit("update", obj, previous);
    }
    for (const [key, obj] of before) if (!next.has(key)) this.emit("delete", obj, obj);
    this.resourceVersion = listed.resourceVersion;
    this.failing = false;
    this.lastError = undefined;
    this.failures = 0;
    if (!this.synced) {
      this.synced = true;
      for (const w of this.waiters.splice(0)) w();
    }
    return true;
  }

  private async watch(): Promise<void> {
    if (this.stopped) return;
    const generation = ++this.generation;
    let expired = false;
    let failure: unknown;
    const onEvent = (type: string, obj: T & { code?: number }) => {
      if (generation !== this.generation || this.stopped) return;
      if (type === "ERROR") {
        // A Status: 410 Expired means our resourceVersion is too old for the server's history.
        if (obj.code === 410) expired = true;
        else
          failure = new Error(
            `watch error: ${obj.code ?? "?"} ${(obj as { message?: string }).message ?? ""}`,
          );
        return;
      }
      this.recovered();
      const rv = obj.metadata?.resourceVersion;
      if (type === "BOOKMARK") {
        if (rv) this.resourceVersion = rv;
        return;
      }
      const key = objectKey(obj);
      const previous = this.store.get(key);
      const kept = this.source.transform ? this.source.transform(obj) : obj;
      if (type === "ADDED" || type === "MODIFIED") {
        this.store.set(key, kept);
        this.emit(previous ? "update" : "add", kept, previous);
      } else if (type === "DELETED") {
        this.store.delete(key);
        this.emit("delete", kept, previous);
      }
      if (rv) this.resourceVersion = rv;
    };
    let ended = false;
    const onDone = (err: unknown) => {
      ended = true;
      if (generation !== this.generation || this.stopped) return;
      this.request = undefined;
      if (expired || apiFailure(err ?? {}).code === 410) {
        this.resourceVersion = "";
        this.opts.log?.debug({ path: this.path }, "watch expired (410); listing again");
        void this.run();
      } else if (err || failure) {
        this.fail(err ?? failure);
      } else {
        void this.run(); // a clean end (server timeout): watch again from the last version
      }
    };
    try {
      const request = await new k8s.Watch(this.kc).watch(
        this.path,
        {
          allowWatchBookmarks: true,
          resourceVersion: this.resourceVersion,
          ...(this.source.labelSelector ? { labelSelector: this.source.labelSelector } : {}),
          ...(this.source.fieldSelector ? { fieldSelector: this.source.fieldSelector } : {}),
        },
        onEvent as (type: string, obj: unknown) => void,
        onDone,
      );
      if (generation === this.generation && !this.stopped) {
        this.request = request;
        // Watching again from our version after a failure: the server answered 200 and streams
        // every change since, so the cache is in step again. Not waiting for an event here: on a
        // quiet collection none comes, and a real API server sends no bookmark until the version
        // moves, so readiness stayed 503 after a failure that had passed.
        if (!ended) this.recovered();
      } else request.abort();
    } catch (err) {
      if (generation === this.generation) this.fail(err);
    }
  }

  private recovered() {
    this.failing = false;
    this.failures = 0;
    this.lastError = undefined;
  }

  private fail(err: unknown) {
    if (this.stopped || this.timer) return;
    this.failing = true;
    this.lastError = err;
    this.failures++;
    const delay = (this.opts.backoffMs ?? defaultBackoff)(this.failures);
    this.opts.log?.warn(
      { path: this.path, err: apiFailure(err).message, delayMs: delay },
      "watch failed; retrying",
    );
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.run();
    }, delay);
    this.timer.unref?.();
  }

  private emit(type: InformerEvent, obj: T, previous: T | undefined) {
    for (const h of [...this.handlers]) {
      try {
        h(type, obj, previous);
      } catch (err) {
        this.opts.log?.error({ path: this.path, err: errorMessage(err) }, "informer handler failed");
      }
    }
  }
}

/** What an acquirer holds: the shared cache, and the release that stops it after the last user. */
export interface InformerHandle<T extends KObject> {
  informer: Informer<T>;
  /** Starts (once for every user) and waits for the first list to land. */
  synced(): Promise<void>;
  release(): Promise<void>;
}

/** One informer per collection (path and label selector) in a process, shared by every user. */
export class Informers {
  private readonly byKey = new Map<string, { informer: Informer<KObject>; users: number }>();

  constructor(
    private readonly kc: k8s.KubeConfig,
    private readonly opts: InformerOptions = {},
  ) {}

  acquire<T extends KObject>(
    source: InformerSource<T>,
    handler?: InformerHandler<T>,
    opts: InformerOptions = {},
  ): InformerHandle<T> {
    const key = `${source.path}?${source.labelSelector ?? ""}&${source.fieldSelector ?? ""}#${source.view ?? ""}`;
    let entry = this.byKey.get(key);
    if (!entry) {
      const informer = new Informer<T>(this.kc, source, { ...this.opts, ...opts });
      entry = { informer: informer as unknown as Informer<KObject>, users: 0 };
      this.byKey.set(key, entry);
    }
    const shared = entry;
    shared.users++;
    const informer = shared.informer as unknown as Informer<T>;
    const off = handler ? informer.on(handler) : () => {};
    let released = false;
    return {
      informer,
      async synced() {
        await informer.start();
        await informer.whenSynced();
      },
      release: async () => {
        if (released) return;
        released = true;
        off();
        if (--shared.users > 0) return;
        if (this.byKey.get(key) === shared) this.byKey.delete(key);
        await informer.stop();
      },
    };
  }

  /** Paths of the running informers whose last list did not land (not yet, or failing since). */
  unsynced(): string[] {
    return [...this.byKey.values()].filter((e) => !e.informer.isSynced()).map((e) => e.informer.path);
  }

  /** Paths of the running informers, for tests and logs. */
  running(): string[] {
    return [...this.byKey.values()].map((e) => e.informer.path);
  }

  async stopAll(): Promise<void> {
    const all = [...this.byKey.values()];
    this.byKey.clear();
    await Promise.all(all.map((e) => e.informer.stop()));
  }
}
