/**
 * The mirror's watches, one per kind a rule selects, shared by every rule naming the kind: started
 * on first ask and waited for a bounded time, released once no rule names the kind. A kind the
 * API server refuses the mirror (403) is remembered for a while and its informer stopped, and
 * Secrets are never watched.
 */
import {
  apiFailure,
  type InformerEvent,
  type InformerHandle,
  type KObject,
  type Kube,
} from "../../queue/kube/index.js";
import type { Logger } from "../../queue/log.js";
import { apiVersionOf, kindKey, kindRefusal, type ResolvedKind } from "./rules.js";

interface KindWatch {
  kind: ResolvedKind;
  handle: InformerHandle<KObject>;
}

/** What became of a kind's watch when a rule asked for it. */
export type WatchState =
  | { state: "synced" | "syncing" | "unserved" }
  | { state: "forbidden"; message: string };

/** Resolves once `p` settles or `ms` passed, whichever comes first. */
function bounded(p: Promise<unknown>, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    t.unref?.();
    const done = () => {
      clearTimeout(t);
      resolve();
    };
    p.then(done, done);
  });
}

export interface KindWatchesOptions {
  kube: Kube;
  log: Logger;
  now: () => number;
  /** How long a kind refused (403) is taken as forbidden before it is listed again. */
  resolveIntervalMs: number;
  /** How long a new kind's first list is waited for. */
  watchSyncTimeoutMs: number;
  onObject(kind: ResolvedKind, type: InformerEvent, obj: KObject, previous: KObject | undefined): void;
  /** A watch that was still syncing when asked for has synced: its rules are reconciled again. */
  onSynced(): void;
}

export class KindWatches {
  private readonly watches = new Map<string, KindWatch>();
  /** Kinds whose list the API server refused the mirror (403), by kindKey, and when. */
  private readonly forbidden = new Map<string, { message: string; at: number }>();

  constructor(private readonly o: KindWatchesOptions) {}

  get(kind: ResolvedKind): KindWatch | undefined {
    return this.watches.get(kindKey(kind));
  }

  /** Informer paths running, one per watched kind. */
  paths(): string[] {
    return [...this.watches.values()].map((w) => w.handle.informer.path);
  }

  /** The paths of kinds known to be forbidden: listed again now and then, never waited for. */
  probingPaths(): string[] {
    return [...this.watches].flatMap(([key, w]) => (this.forbidden.has(key) ? [w.handle.informer.path] : []));
  }

  /** Releases every watch whose kindKey is not in `used`. */
  async releaseAllBut(used: ReadonlySet<string>): Promise<void> {
    for (const [key, w] of [...this.watches]) {
      if (used.has(key)) continue;
      this.watches.delete(key);
      await w.handle.release();
    }
  }

  /**
   * The watch of a kind, started if it is not running: synced, still syncing (its first list has
   * not landed within watchSyncTimeoutMs: its rules are reconciled again once it does), or
   * forbidden. Secrets are refused before any list; a list the API server refuses (403) is
   * remembered for resolveIntervalMs and its informer stopped, so it neither retries on its own
   * nor keeps the mirror unready.
   */
  async watchOf(kind: ResolvedKind): Promise<WatchState> {
    const refused = kindRefusal(kind);
    if (refused) return { state: "forbidden", message: refused };
    const key = kindKey(kind);
    const known = this.forbidden.get(key);
    if (known && this.o.now() - known.at < this.o.resolveIntervalMs)
      return { state: "forbidden", message: known.message };
    let w = this.watches.get(key);
    const created = !w;
    if (!w) {
      const handle = await this.o.kube.objectInformer<KObject>(
        apiVersionOf(kind),
        kind.kind,
        undefined,
        (type, obj, prev) => this.o.onObject(kind, type, obj, prev),
      );
      if (!handle) return { state: "unserved" };
      const started: KindWatch = { kind, handle };
      w = started;
      this.watches.set(key, started);
      void handle.informer.whenSynced().then(() => {
        if (this.watches.get(key) === started) this.o.onSynced();
      });
    }
    const informer = w.handle.informer;
    // Only a watch started now is waited for, and for a bounded time; a watch already running
    // is taken as it is (its sync, when it comes, reconciles its rules again).
    if (created) await bounded(informer.start(), this.o.watchSyncTimeoutMs);
    if (informer.hasSynced()) {
      this.forbidden.delete(key);
      return { state: "synced" };
    }
    if (informer.lastError !== undefined && apiFailure(informer.lastError).code === 403) {
      const message = `the mirror may not list ${kind.resource}${kind.group ? `.${kind.group}` : ""} (403): a cluster administrator lets it with a ClusterRole labelled applygate.dev/aggregate-to-mirror=true`;
      if (!known) this.o.log.warn({ kind: key }, "the mirror may not watch a kind a WatchRule names");
      this.forbidden.set(key, { message, at: this.o.now() });
      this.watches.delete(key);
      await w.handle.release();
      return { state: "forbidden", message };
    }
    return { state: "syncing" };
  }
}
