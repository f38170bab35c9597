/**
 * The window observer of the webhook applier: while an operation's apply window is open (from
 * just before its request until 10 s after it ends), each write to a watched object that the
 * claim's own field managers (`spec.fieldManagers`) alone made is reported to the branch worker,
 * which tells the tool's apply from an edit and withholds a late apply over a newer edit (a
 * Repair). It watches the kinds it is configured with (`--watch-kinds`; by default ConfigMaps,
 * Services and Deployments, never Secrets), read-only, across all namespaces.
 */
import { WINDOW_GRACE_MS } from "../../queue/contract.js";
import type { InformerHandle, KObject, Kube } from "../../queue/kube/index.js";
import type { Logger } from "../../queue/log.js";
import type { WindowObserver } from "../applier-kind.js";
import { applierWriteOf, writtenSince } from "../applier-write.js";
import type { Reporter } from "../reporter.js";
import { DEFAULT_WATCHED_KINDS, listedObjects, type WatchedKind, watchWrites } from "../watch-kinds.js";

export interface WebhookWindow {
  token: string;
  claim: { namespace: string; name: string };
  branchKey: string;
  managers: readonly string[];
  /**
   * The operation started before this process (a recovery): the objects as listed are judged too,
   * for the tool's writes made since then while nobody watched.
   */
  missedSince?: string;
}

/** What the executor tells the observer. */
export interface WebhookWindowHooks {
  opened(w: WebhookWindow): void;
  closed(token: string): void;
}

interface Open extends WebhookWindow {
  closedAt?: number;
}

type Watched = KObject & { metadata: KObject["metadata"] & { managedFields?: unknown[] } };

export interface WebhookWindowObserverDeps {
  kube: Kube;
  reporter: Reporter;
  log: Logger;
  now: () => Date;
  kinds?: WatchedKind[];
  graceMs?: number;
}

export class WebhookWindowObserver implements WindowObserver, WebhookWindowHooks {
  private readonly windows = new Map<string, Open>();
  private readonly watchers: InformerHandle<KObject>[] = [];
  private readonly seen = new Map<string, Set<string>>();
  private readonly graceMs: number;

  constructor(private readonly d: WebhookWindowObserverDeps) {
    this.graceMs = d.graceMs ?? WINDOW_GRACE_MS;
  }

  async start(): Promise<void> {
    this.watchers.push(
      ...(await watchWrites<Watched>(
        this.d.kube,
        this.d.kinds ?? DEFAULT_WATCHED_KINDS,
        this.d.log,
        (o, previous) => void this.observe(o, previous),
      )),
    );
  }

  async stop(): Promise<void> {
    await Promise.all(this.watchers.map((w) => w.release()));
  }

  opened(w: WebhookWindow): void {
    if (this.windows.has(w.token) || w.managers.length === 0) return;
    const win: Open = { ...w };
    this.windows.set(w.token, win);
    this.seen.set(w.token, new Set());
    const since = w.missedSince;
    if (since !== undefined)
      for (const obj of listedObjects<Watched>(this.watchers))
        void this.observe(obj, undefined, { only: win, since });
  }

  closed(token: string): void {
    const w = this.windows.get(token);
    if (!w || w.closedAt !== undefined) return;
    w.closedAt = this.d.now().getTime();
    const t = setTimeout(() => {
      this.windows.delete(token);
      this.seen.delete(token);
    }, this.graceMs + 1000);
    t.unref?.();
  }

  /** The window tokens open (or in their grace), for tests and logs. */
  open(): string[] {
    return [...this.windows.keys()];
  }

  /** `listed`: one window judging an object as listed (no version before), for a write since then. */
  private async observe(
    obj: Watched,
    previous: unknown[] | undefined,
    listed?: { only: Open; since: string },
  ): Promise<void> {
    const now = this.d.now();
    for (const w of listed ? [listed.only] : this.windows.values()) {
      if (w.closedAt !== undefined && now.getTime() > w.closedAt + this.graceMs) continue;
      const write = applierWriteOf(obj, w.managers, previous);
      if (!write || (listed && !writtenSince(write, listed.since))) continue;
      const seen = this.seen.get(w.token);
      if (!seen || seen.has(write.resourceVersion)) continue;
      seen.add(write.resourceVersion);
      try {
        await this.d.reporter.applierWrite({
          token: w.token,
          claim: { kind: "WebhookClaim", ...w.claim },
          branchKey: w.branchKey,
          object: {
            apiVersion: obj.apiVersion ?? "",
            kind: obj.kind ?? "",
            ...(obj.metadata.namespace ? { namespace: obj.metadata.namespace } : {}),
            name: obj.metadata.name,
          },
          manager: write.manager,
          writtenAt: write.writtenAt,
          resourceVersion: write.resourceVersion,
          observedAt: now.toISOString(),
        });
      } catch (err) {
        this.d.log.warn({ err: (err as Error).message, token: w.token }, "could not report an applier write");
      }
    }
  }
}
