/**
 * The window observer for Argo CD: while an operation's apply window is open (from the update that
 * starts the sync until 10 s after it ends), report each write to an object carrying the
 * Application's tracking annotation that Argo CD's managers alone made (`applierWriteOf`, against
 * the version seen before), so the branch worker can tell the apply landing from an edit. It watches the kinds it is
 * configured with (default ConfigMaps, Services, Deployments: never Secrets unless asked), across
 * all namespaces.
 */

import { WINDOW_GRACE_MS } from "../../queue/contract.js";
import type { InformerHandle, KObject, Kube } from "../../queue/kube/index.js";
import type { Logger } from "../../queue/log.js";
import type { WindowObserver } from "../applier-kind.js";
import { writtenSince } from "../applier-write.js";
import type { ClaimLocator } from "../operation-record.js";
import type { Reporter } from "../reporter.js";
import { DEFAULT_WATCHED_KINDS, listedObjects, type WatchedKind, watchWrites } from "../watch-kinds.js";
import { appInstance } from "./application.js";
import type { WindowHooks } from "./executor.js";
import {
  applierWriteOf,
  type OpenWindow,
  trackedInstance,
  type WatchedObject,
  windowsFor,
} from "./window-writes.js";

export { DEFAULT_WATCHED_KINDS, parseWatchKinds, type WatchedKind } from "../watch-kinds.js";

export interface ArgoCDWindowObserverDeps {
  kube: Kube;
  reporter: Reporter;
  log: Logger;
  now: () => Date;
  /** Argo CD's own namespace: Applications there track as `<name>`, others as `<ns>_<name>`. */
  controlNamespace?: string;
  kinds?: WatchedKind[];
  /** The window stays open this long after the operation ends (default 10 s). */
  graceMs?: number;
}

export class ArgoCDWindowObserver implements WindowObserver, WindowHooks {
  private readonly windows = new Map<string, OpenWindow>();
  private readonly watchers: InformerHandle<KObject>[] = [];
  /** resourceVersions already reported, per window token. */
  private readonly seen = new Map<string, Set<string>>();
  private readonly graceMs: number;

  constructor(private readonly d: ArgoCDWindowObserverDeps) {
    this.graceMs = d.graceMs ?? WINDOW_GRACE_MS;
  }

  async start(): Promise<void> {
    this.watchers.push(
      ...(await watchWrites<WatchedObject>(
        this.d.kube,
        this.d.kinds ?? DEFAULT_WATCHED_KINDS,
        this.d.log,
        (o, previous) => void this.observe(o, previous),
        trackedInstance,
      )),
    );
  }

  async stop(): Promise<void> {
    await Promise.all(this.watchers.map((w) => w.release()));
  }

  opened(w: {
    token: string;
    claim: ClaimLocator;
    branchKey: string;
    application: { namespace: string; name: string };
    missedSince?: string;
  }): void {
    if (this.windows.has(w.token)) return;
    const win: OpenWindow = {
      token: w.token,
      instance: appInstance(w.application, this.d.controlNamespace ?? "argocd"),
      claim: { kind: "ArgoCDClaim", namespace: w.claim.namespace, name: w.claim.name },
      branchKey: w.branchKey,
    };
    this.windows.set(w.token, win);
    this.seen.set(w.token, new Set());
    // Opened again by a new process: the objects as they are, for writes made while nobody watched.
    const since = w.missedSince;
    if (since !== undefined)
      for (const obj of listedObjects<WatchedObject>(this.watchers))
        void this.observe(obj, undefined, { only: win, since });
  }

  closed(token: string): void {
    const w = this.windows.get(token);
    if (!w) return;
    w.closedAt = this.d.now().getTime();
    const t = setTimeout(() => {
      this.windows.delete(token);
      this.seen.delete(token);
    }, this.graceMs + 1000);
    t.unref?.();
  }

  /** The window tokens currently open (or in their grace), for tests and logs. */
  open(): string[] {
    return [...this.windows.keys()];
  }

  /** `listed`: one window judging an object as listed (no version before), for a write since then. */
  private async observe(
    obj: WatchedObject,
    previous: unknown[] | undefined,
    listed?: { only: OpenWindow; since: string },
  ): Promise<void> {
    const now = this.d.now();
    const hits = windowsFor(obj, listed ? [listed.only] : this.windows.values(), now.getTime(), this.graceMs);
    if (hits.length === 0) return;
    const write = applierWriteOf(obj, previous);
    if (!write || (listed && !writtenSince(write, listed.since))) return;
    for (const w of hits) {
      const seen = this.seen.get(w.token);
      if (!seen || seen.has(write.resourceVersion)) continue;
      seen.add(write.resourceVersion);
      try {
        await this.d.reporter.applierWrite({
          token: w.token,
          claim: w.claim,
          branchKey: w.branchKey,
          object: write.object,
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
