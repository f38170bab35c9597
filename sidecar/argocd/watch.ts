/**
 * The Applications the Argo CD executor follows, from the watch's cache: one shared informer per
 * namespace it serves (acquired on the first operation there, started and listed once, kept until
 * the executor shuts down), and wakeups on every event about an Application. The cache answers
 * progress and outcomes; anything that could refuse or terminate is read again from the API server
 * by the caller (`read`), since a cache may lag behind it.
 */
import type { InformerHandle, KObject, Kube } from "../../queue/kube/index.js";
import type { Logger } from "../../queue/log.js";
import { Wakeups } from "../wakeups.js";
import { APPLICATION } from "./application.js";

export interface AppRef {
  namespace: string;
  name: string;
}

export const appKey = (r: AppRef) => `${r.namespace}/${r.name}`;

export class ApplicationWatch {
  readonly wakeups = new Wakeups();
  private readonly handles = new Map<string, InformerHandle<KObject>>();

  constructor(
    private readonly kube: Kube,
    private readonly log: Logger,
  ) {}

  /**
   * Starts the watch of `namespace` once and waits for its first list (landed or failed: a failed
   * one keeps retrying in the background, and until it lands every read goes to the API server).
   */
  async serve(namespace: string): Promise<void> {
    let h = this.handles.get(namespace);
    if (!h) {
      h = this.kube.informer(APPLICATION, {
        namespace,
        log: this.log,
        onChange: (_type, app) =>
          this.wakeups.notify(appKey({ namespace: app.metadata.namespace ?? "", name: app.metadata.name })),
      });
      this.handles.set(namespace, h);
    }
    await h.informer.start();
  }

  /** Whether the cache of the Application's namespace holds a list that landed and no failure since. */
  watching(ref: AppRef): boolean {
    return this.handles.get(ref.namespace)?.informer.isSynced() === true;
  }

  /**
   * The Application as the watch last delivered it; undefined while the watch is not synced or
   * does not hold it (not delivered yet, or gone): then only `read` can tell.
   */
  cached(ref: AppRef): KObject | undefined {
    const h = this.handles.get(ref.namespace);
    if (!h?.informer.isSynced()) return undefined;
    return h.informer.get(ref.name, ref.namespace);
  }

  /** The Application read from the API server (uncached). */
  read(ref: AppRef): Promise<KObject | undefined> {
    return this.kube.get(APPLICATION, ref.namespace, ref.name);
  }

  async stop(): Promise<void> {
    const all = [...this.handles.values()];
    this.handles.clear();
    await Promise.all(all.map((h) => h.release()));
  }
}
