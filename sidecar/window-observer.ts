/**
 * The apply window observer every kind shares: while an operation's window is open (from just
 * before the write that starts the apply until the grace after its end), each write to an object
 * of the window that the applier's own field managers alone made (`applierWriteOf`, against the
 * version seen before) is reported to the branch worker once, so it can tell the apply landing
 * from an edit. A window opened again by a new process (a recovered operation, `missedSince`)
 * also judges the objects as listed, for the applier's writes made while nobody watched.
 *
 * A kind supplies only what differs: which objects a window watches and which belong to it
 * (Flux: the Kustomization's inventory; Argo CD: the Application's tracking annotation; the
 * webhook applier: the claim's field managers), and which managers are the applier's.
 */
import { WINDOW_GRACE_MS } from "../queue/contract.js";
import { errorMessage } from "../queue/errors.js";
import type { InformerHandle, KObject, Kube } from "../queue/kube/index.js";
import type { Logger } from "../queue/log.js";
import type { WindowHooks, WindowObserver, WindowOpening } from "./applier-kind.js";
import { type ApplierWrite, applierWriteOf, writtenSince } from "./applier-write.js";
import type { Reporter } from "./reporter.js";
import { DEFAULT_WATCHED_KINDS, listedObjects, type WatchedKind, watchWrites } from "./watch-kinds.js";

/** An object as a watch delivers it. */
export interface WatchedObject {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name?: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    managedFields?: unknown[];
  };
}

/** An open window (or one in its grace). */
export type OpenWindow<W extends WindowOpening> = W & {
  /** When the operation ended: reports go on until `closedAt + grace`. */
  closedAt?: number;
  /** The object versions already reported (`uid@resourceVersion`). */
  seen: Set<string>;
};

/** Whether a window takes a write at `now`: open, or closed less than `graceMs` ago (pure). */
export function windowLive(w: { closedAt?: number }, now: number, graceMs: number): boolean {
  return w.closedAt === undefined || now <= w.closedAt + graceMs;
}

export interface WindowObserverDeps {
  reporter: Reporter;
  log: Logger;
  now: () => Date;
  /** The window stays open this long after the operation ends (default 10 s). */
  graceMs?: number;
}

export abstract class WindowObserverBase<W extends WindowOpening = WindowOpening>
  implements WindowObserver, WindowHooks<W>
{
  protected readonly windows = new Map<string, OpenWindow<W>>();
  protected readonly graceMs: number;

  constructor(protected readonly base: WindowObserverDeps) {
    this.graceMs = base.graceMs ?? WINDOW_GRACE_MS;
  }

  abstract stop(): Promise<void>;

  /** Opens the window of `w.token` (again: no change); resolves once it watches. */
  async open(w: W): Promise<void> {
    if (this.windows.has(w.token) || !this.accepts(w)) return;
    const win: OpenWindow<W> = { ...w, seen: new Set() };
    this.windows.set(w.token, win);
    await this.opened(win);
  }

  /** The operation ended: the window takes writes for its grace more, then is forgotten. */
  close(token: string): void {
    const win = this.windows.get(token);
    if (!win || win.closedAt !== undefined) return;
    win.closedAt = this.base.now().getTime();
    // The grace is judged by `live`; the window is forgotten a second later, so a write judged at
    // the edge still finds it.
    const t = setTimeout(() => this.forget(win), this.graceMs + 1_000);
    t.unref?.();
  }

  /** The window tokens open now (or in their grace), for tests and logs. */
  openWindows(): string[] {
    return [...this.windows.keys()];
  }

  /** Whether the kind opens a window for this operation at all. */
  protected accepts(_w: W): boolean {
    return true;
  }

  /** The window is open: start what it watches, and judge the objects as listed when `missedSince`. */
  protected abstract opened(win: OpenWindow<W>): Promise<void>;

  /** The window is forgotten: stop what it watched. */
  protected ended(_win: OpenWindow<W>): void {}

  protected forget(win: OpenWindow<W>): void {
    if (this.windows.get(win.token) !== win) return;
    this.windows.delete(win.token);
    this.ended(win);
  }

  /** The windows a write arriving now may belong to. */
  protected live(only?: OpenWindow<W>): OpenWindow<W>[] {
    const now = this.base.now().getTime();
    return (only ? [only] : [...this.windows.values()]).filter((w) => windowLive(w, now, this.graceMs));
  }

  /**
   * Judges one object for one window: the applier's write since `previous` (the managedFields last
   * seen; none: judged as listed, a write at or after `listedSince`), reported once per version.
   */
  protected async judge(
    win: OpenWindow<W>,
    obj: WatchedObject,
    managers: readonly string[],
    previous: unknown[] | undefined,
    listedSince?: string,
  ): Promise<ApplierWrite | undefined> {
    const found = applierWriteOf(obj, managers, previous);
    const write =
      found && (listedSince === undefined || writtenSince(found, listedSince)) ? found : undefined;
    if (!write) return undefined;
    const once = `${obj.metadata.uid ?? ""}@${write.resourceVersion}`;
    if (win.seen.has(once)) return write;
    win.seen.add(once);
    try {
      await this.base.reporter.applierWrite({
        token: win.token,
        claim: win.claim,
        branchKey: win.branchKey,
        object: {
          apiVersion: obj.apiVersion ?? "",
          kind: obj.kind ?? "",
          ...(obj.metadata.namespace ? { namespace: obj.metadata.namespace } : {}),
          name: obj.metadata.name ?? "",
        },
        manager: write.manager,
        writtenAt: write.writtenAt,
        resourceVersion: write.resourceVersion,
        observedAt: this.base.now().toISOString(),
      });
    } catch (err) {
      this.base.log.warn({ err: errorMessage(err), token: win.token }, "could not report an applier write");
    }
    return write;
  }
}

export interface WatchedKindsDeps extends WindowObserverDeps {
  kube: Kube;
  /** Kinds whose writes are watched, cluster-wide (default ConfigMaps, Services, Deployments). */
  kinds?: WatchedKind[];
}

/**
 * A window observer over kinds watched cluster-wide from the start (Argo CD, the webhook applier):
 * each write is judged for every live window it belongs to.
 */
export abstract class WatchedKindsObserver<W extends WindowOpening> extends WindowObserverBase<W> {
  private readonly watchers: InformerHandle<KObject>[] = [];

  constructor(private readonly d: WatchedKindsDeps) {
    super(d);
  }

  /** Whether the object belongs to the window (the operation's applier manages it). */
  protected abstract belongs(win: OpenWindow<W>, obj: WatchedObject): boolean;
  /** The field managers whose writes are the window's applier's. */
  protected abstract managersOf(win: OpenWindow<W>): readonly string[];
  /** Whose managedFields the watches keep between versions (default every object's). */
  protected remembers(_obj: WatchedObject): unknown {
    return true;
  }

  async start(): Promise<void> {
    this.watchers.push(
      ...(await watchWrites<WatchedObject>(
        this.d.kube,
        this.d.kinds ?? DEFAULT_WATCHED_KINDS,
        this.d.log,
        (o, previous) => void this.observe(o, previous),
        (o) => this.remembers(o),
      )),
    );
  }

  async stop(): Promise<void> {
    await Promise.all(this.watchers.map((w) => w.release()));
  }

  protected async opened(win: OpenWindow<W>): Promise<void> {
    const since = win.missedSince;
    if (since === undefined) return;
    for (const obj of listedObjects<WatchedObject>(this.watchers))
      void this.observe(obj, undefined, win, since);
  }

  private async observe(
    obj: WatchedObject,
    previous: unknown[] | undefined,
    only?: OpenWindow<W>,
    listedSince?: string,
  ): Promise<void> {
    for (const w of this.live(only))
      if (this.belongs(w, obj)) await this.judge(w, obj, this.managersOf(w), previous, listedSince);
  }
}
