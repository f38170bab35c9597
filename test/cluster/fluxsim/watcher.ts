/**
 * A list-watch cache over one resource (client-node's informer), restarted with backoff when the
 * watch fails, that hands each change to the controller with the copy it replaced, so predicates
 * can compare old and new the way controller-runtime's do.
 */
import * as k8s from "@kubernetes/client-node";
import type { Logger } from "pino";
import { errorMessage } from "../../../queue/errors.js";
import type { Clock } from "../clock.js";

export type Obj = k8s.KubernetesObject & { spec?: any; status?: any };
export type Change = (type: "add" | "update" | "delete", obj: Obj, old: Obj | undefined) => void;

export const keyOf = (o: { metadata?: { namespace?: string; name?: string } }) =>
  `${o.metadata?.namespace ?? ""}/${o.metadata?.name ?? ""}`;

export class Watcher {
  readonly #informer: k8s.Informer<Obj> & k8s.ObjectCache<Obj>;
  readonly #seen = new Map<string, Obj>();
  #stopped = false;
  #timer: unknown;
  #failures = 0;

  constructor(
    kc: k8s.KubeConfig,
    group: string,
    version: string,
    plural: string,
    private readonly clock: Clock,
    private readonly log: Logger,
    onChange: Change,
  ) {
    const custom = kc.makeApiClient(k8s.CustomObjectsApi);
    this.#informer = k8s.makeInformer(
      kc,
      `/apis/${group}/${version}/${plural}`,
      () =>
        custom.listClusterCustomObject({ group, version, plural }) as Promise<k8s.KubernetesListObject<Obj>>,
    );
    const emit = (type: "add" | "update" | "delete") => (obj: Obj) => {
      if (this.#stopped) return;
      this.#failures = 0;
      const key = keyOf(obj);
      const old = this.#seen.get(key);
      if (type === "delete") this.#seen.delete(key);
      else this.#seen.set(key, obj);
      onChange(type, obj, old);
    };
    this.#informer.on("add", emit("add"));
    this.#informer.on("update", emit("update"));
    this.#informer.on("delete", emit("delete"));
    this.#informer.on("error", (err) => this.#restartLater(err));
  }

  async start(): Promise<void> {
    await this.#informer.start();
  }

  get(namespace: string, name: string): Obj | undefined {
    return this.#informer.get(name, namespace);
  }

  list(): Obj[] {
    return [...this.#informer.list()];
  }

  #restartLater(err: unknown): void {
    if (this.#stopped || this.#timer) return;
    this.#failures++;
    const delay = Math.min(2000, 50 * 2 ** (this.#failures - 1));
    this.log.warn({ err: errorMessage(err), delayMs: delay }, "watch failed; restarting");
    this.#timer = this.clock.setTimeout(() => {
      this.#timer = undefined;
      if (this.#stopped) return;
      this.#informer.start().catch((e: unknown) => this.#restartLater(e));
    }, delay);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) this.clock.clearTimeout(this.#timer);
    this.#timer = undefined;
    try {
      await this.#informer.stop();
    } catch {
      // stopping aborts the watch request, which the informer reports as an error: expected
    }
  }
}

/**
 * A controller's view of its objects: the cache's copy, or the controller's own last write of it
 * when that is newer (the cache lags the writes; the simulated server's resourceVersions are a
 * counter, so the higher one is the newer copy).
 */
export class OwnWrites {
  readonly #written = new Map<string, Obj>();
  constructor(private readonly cache: () => Watcher) {}

  current(namespace: string, name: string): Obj | undefined {
    const cached = this.cache().get(namespace, name);
    const mine = this.#written.get(`${namespace}/${name}`);
    if (!mine || !cached || mine.metadata?.uid !== cached.metadata?.uid) return cached;
    return Number(mine.metadata?.resourceVersion) > Number(cached.metadata?.resourceVersion) ? mine : cached;
  }

  wrote(key: string, obj: Obj): void {
    this.#written.set(key, obj);
  }

  forget(key: string): void {
    this.#written.delete(key);
  }
}
