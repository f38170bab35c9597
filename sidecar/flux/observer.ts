/**
 * The window observer for Flux (sidecar/window-observer.ts): a window watches the objects in its
 * Kustomization's inventory (and those carrying its owner labels), one shared informer per kind
 * and namespace, and a write is kustomize-controller's when its manager alone made it. Opening a
 * window resolves once its first watches listed, so the resume waits for them.
 */

import { APPLIER_FIELD_MANAGERS } from "../../queue/contract.js";
import { errorMessage } from "../../queue/errors.js";
import { type InformerHandle, inventoryEntriesOf, type KObject, type Kube } from "../../queue/kube/index.js";
import type { WindowOpening } from "../applier-kind.js";
import {
  type OpenWindow,
  type WatchedObject,
  WindowObserverBase,
  type WindowObserverDeps,
} from "../window-observer.js";
import { KUSTOMIZATION, type ObjectKey } from "./resources.js";

const OWNER_NAME = "kustomize.toolkit.fluxcd.io/name";
const OWNER_NAMESPACE = "kustomize.toolkit.fluxcd.io/namespace";

/** An inventory entry id: `<namespace>_<name>_<group>_<kind>`. */
export function parseInventoryId(id: string, v: string) {
  const parts = id.split("_");
  if (parts.length < 4) return undefined;
  const kind = parts.at(-1)!;
  const group = parts.at(-2)!;
  const namespace = parts[0]!;
  const name = parts.slice(1, -2).join("_");
  return { namespace, name, kind, apiVersion: group ? `${group}/${v}` : v };
}

/** What a Flux window watches besides the shared state. */
interface Watches {
  /** namespace/name/kind of every inventory object. */
  ids: Set<string>;
  /** The shared informers this window listens to, by `apiVersion kind namespace`. */
  watches: Map<string, { handle: InformerHandle<KObject>; off: () => void }>;
  refresh?: NodeJS.Timeout;
}

type Window = OpenWindow<WindowOpening> & Watches;

export interface FluxWindowObserverDeps extends WindowObserverDeps {
  kube: Kube;
  /** Re-reads the inventory this often while open, for objects an apply adds (default 2 s). */
  inventoryRefreshMs?: number;
  /** How long opening a window may hold the resume while its watches list (default 2 s). */
  openTimeoutMs?: number;
  /**
   * Reads the Kustomization whose inventory is watched (default: from the API server; the kind
   * passes its client's watch cache, so a window's refreshes cost no request).
   */
  readKustomization?: (ref: ObjectKey) => Promise<KObject | undefined>;
}

export class FluxWindowObserver extends WindowObserverBase<WindowOpening> {
  private readonly managers = APPLIER_FIELD_MANAGERS.flux;

  constructor(private readonly d: FluxWindowObserverDeps) {
    super(d);
  }

  async stop(): Promise<void> {
    for (const win of [...this.windows.values()]) this.forget(win);
  }

  /** A window of an operation no branch worker waits for (no branch key) reports to nobody. */
  protected override accepts(w: WindowOpening): boolean {
    return w.branchKey !== "";
  }

  /**
   * Resolves once the window's first watches are listed, so every later write has a newer
   * resourceVersion than the list and reaches the watch: the caller resumes only then. A slow API
   * server holds the resume at most `openTimeoutMs`.
   */
  protected async opened(open: OpenWindow<WindowOpening>): Promise<void> {
    const win = Object.assign(open, { ids: new Set<string>(), watches: new Map() }) as Window;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<"late">((res) => {
      timer = setTimeout(() => res("late"), this.d.openTimeoutMs ?? 2_000);
    });
    const first = await Promise.race([this.refresh(win), late]);
    clearTimeout(timer);
    if (first === "late")
      this.d.log.warn({ token: win.token }, "the window's watches were not ready in time");
  }

  protected override ended(open: OpenWindow<WindowOpening>): void {
    const win = open as Window;
    if (win.refresh) clearTimeout(win.refresh);
    for (const w of win.watches.values()) {
      w.off();
      void w.handle.release();
    }
    win.watches.clear();
  }

  private async refresh(win: Window): Promise<void> {
    if (this.windows.get(win.token) !== win) return;
    try {
      const ref = win.applier;
      const ks = this.d.readKustomization
        ? await this.d.readKustomization(ref)
        : await this.d.kube.get(KUSTOMIZATION, ref.namespace, ref.name);
      for (const e of inventoryEntriesOf(ks)) {
        const ref = parseInventoryId(e.id, e.v);
        if (!ref) continue;
        win.ids.add(`${ref.namespace}/${ref.name}/${ref.kind}`);
        const key = `${ref.apiVersion} ${ref.kind} ${ref.namespace}`;
        if (!win.watches.has(key)) await this.watch(win, key, ref.apiVersion, ref.kind, ref.namespace);
      }
    } catch (err) {
      this.d.log.warn({ err: errorMessage(err), token: win.token }, "could not read the inventory");
    }
    if (this.windows.get(win.token) !== win) return;
    win.refresh = setTimeout(() => void this.refresh(win), this.d.inventoryRefreshMs ?? 2_000);
    win.refresh.unref?.();
  }

  /**
   * Listens to the shared informer of one kind in one namespace. Only changes after a list landed
   * are judged (the listed objects are no writes, but for a window opened again, `missedSince`),
   * and the informer hands each one the object as cached before it (its managedFields are the
   * write's proof). Resolves once the first list was tried: a kind that cannot be listed holds
   * the window's other watches up no longer.
   */
  private async watch(win: Window, key: string, apiVersion: string, kind: string, namespace: string) {
    const handle = await this.d.kube.objectInformer<KObject>(apiVersion, kind, namespace);
    if (!handle) return;
    if (this.windows.get(win.token) !== win || win.watches.has(key)) {
      await handle.release();
      return;
    }
    this.d.log.debug({ token: win.token, watch: key }, "window watching");
    const off = handle.informer.on((type, obj, previous) => {
      if (type === "delete" || !handle.informer.isSynced()) return;
      void this.judgeOurs(win, obj, previous?.metadata.managedFields);
    });
    win.watches.set(key, { handle, off });
    await handle.informer.start();
    const since = win.missedSince;
    if (since !== undefined && handle.informer.isSynced())
      for (const obj of handle.informer.list(namespace)) await this.judgeOurs(win, obj, undefined, since);
  }

  /** Judges an object that is the Kustomization's (in its inventory, or with its owner labels). */
  private async judgeOurs(win: Window, obj: WatchedObject, previous: unknown[] | undefined, since?: string) {
    if (this.live(win).length === 0) return;
    const m = obj.metadata;
    const id = `${m.namespace ?? ""}/${m.name}/${obj.kind}`;
    const labels = m.labels ?? {};
    const ours =
      win.ids.has(id) ||
      (labels[OWNER_NAME] === win.applier.name && labels[OWNER_NAMESPACE] === win.applier.namespace);
    if (!ours) return;
    const write = await this.judge(win, obj, this.managers, previous, since);
    this.d.log.debug(
      {
        token: win.token,
        object: id,
        resourceVersion: m.resourceVersion,
        applierWrite: write !== undefined,
        previous: previous !== undefined,
        ...(since !== undefined ? { listedAfterRestart: true } : {}),
      },
      "window saw a write",
    );
  }
}
