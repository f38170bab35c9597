/**
 * The window observer: while an operation's apply window is open (from its record until 10 s
 * after it ends), watch the objects in the Kustomization's inventory and report each write that
 * is kustomize-controller's alone (`applierWriteOf`, against the object's version before it), with
 * the object, the entry's time and the resourceVersion, so the branch worker can tell an echo
 * from a late apply.
 */

import type * as k8s from "@kubernetes/client-node";
import { APPLIER_FIELD_MANAGERS, type ClaimRef, WINDOW_GRACE_MS } from "../../queue/contract.js";
import type { InformerHandle, KObject, Kube } from "../../queue/kube/index.js";
import type { Logger } from "../../queue/log.js";
import type { WindowObserver } from "../applier-kind.js";
import { applierWriteOf, writtenSince } from "../applier-write.js";
import type { Reporter } from "../reporter.js";
import type { WindowHooks } from "./executor.js";
import { KUSTOMIZATION, type Kustomization, type ObjectKey } from "./resources.js";

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

interface Window {
  token: string;
  claim: ClaimRef;
  branchKey: string;
  kustomization: ObjectKey;
  /** namespace/name/kind of every inventory object. */
  ids: Set<string>;
  /** The shared informers this window listens to, by `apiVersion kind namespace`. */
  watches: Map<string, { handle: InformerHandle<KObject>; off: () => void }>;
  seen: Set<string>;
  /** When the operation started, for a window a new process opened again (see `open`). */
  missedSince?: string;
  closing?: NodeJS.Timeout;
  refresh?: NodeJS.Timeout;
}

export interface FluxWindowObserverDeps {
  kube: Kube;
  reporter: Reporter;
  log: Logger;
  now: () => Date;
  /** The window stays open this long after the operation ends (default 10 s). */
  graceMs?: number;
  /** Re-reads the inventory this often while open, for objects an apply adds (default 2 s). */
  inventoryRefreshMs?: number;
  /** How long opening a window may hold the resume while its watches list (default 2 s). */
  openTimeoutMs?: number;
  /**
   * Reads the Kustomization whose inventory is watched (default: from the API server; the kind
   * passes its client's watch cache, so a window's refreshes cost no request).
   */
  readKustomization?: (ref: ObjectKey) => Promise<Kustomization | undefined>;
}

export class FluxWindowObserver implements WindowObserver, WindowHooks {
  private readonly windows = new Map<string, Window>();
  private readonly managers = APPLIER_FIELD_MANAGERS.flux;

  constructor(private readonly d: FluxWindowObserverDeps) {}

  /**
   * Opens a window and resolves once its first watches are listed, so every later write has a
   * newer resourceVersion than the list and reaches the watch: the caller resumes only then. A
   * slow API server holds the resume at most `openTimeoutMs`. A window opened again for an
   * operation a new process recovered (`missedSince`: when it started) also judges the objects its
   * watches list, as they are, for the applier's writes made since while no process watched.
   */
  async open(w: {
    token: string;
    claim: ClaimRef;
    branchKey: string;
    kustomization: ObjectKey;
    missedSince?: string;
  }): Promise<void> {
    if (this.windows.has(w.token) || !w.branchKey) return;
    const win: Window = { ...w, ids: new Set(), watches: new Map(), seen: new Set() };
    this.windows.set(w.token, win);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<"late">((res) => {
      timer = setTimeout(() => res("late"), this.d.openTimeoutMs ?? 2_000);
    });
    const first = await Promise.race([this.refresh(win), late]);
    clearTimeout(timer);
    if (first === "late") this.d.log.warn({ token: w.token }, "the window's watches were not ready in time");
  }

  close(token: string): void {
    const win = this.windows.get(token);
    if (!win || win.closing) return;
    win.closing = setTimeout(() => this.end(win), this.d.graceMs ?? WINDOW_GRACE_MS);
    win.closing.unref?.();
  }

  async stop(): Promise<void> {
    for (const win of [...this.windows.values()]) this.end(win);
  }

  /** Tokens of windows open now (for tests and logs). */
  openWindows(): string[] {
    return [...this.windows.keys()];
  }

  private end(win: Window) {
    if (win.closing) clearTimeout(win.closing);
    if (win.refresh) clearTimeout(win.refresh);
    for (const w of win.watches.values()) {
      w.off();
      void w.handle.release();
    }
    win.watches.clear();
    this.windows.delete(win.token);
  }

  private async refresh(win: Window): Promise<void> {
    if (this.windows.get(win.token) !== win) return;
    try {
      const ks = this.d.readKustomization
        ? await this.d.readKustomization(win.kustomization)
        : await this.d.kube.get<Kustomization>(
            KUSTOMIZATION,
            win.kustomization.namespace,
            win.kustomization.name,
          );
      for (const e of ks?.status?.inventory?.entries ?? []) {
        const ref = parseInventoryId(e.id, e.v);
        if (!ref) continue;
        win.ids.add(`${ref.namespace}/${ref.name}/${ref.kind}`);
        const key = `${ref.apiVersion} ${ref.kind} ${ref.namespace}`;
        if (!win.watches.has(key)) await this.watch(win, key, ref.apiVersion, ref.kind, ref.namespace);
      }
    } catch (err) {
      this.d.log.warn({ err: (err as Error).message, token: win.token }, "could not read the inventory");
    }
    if (this.windows.get(win.token) !== win) return;
    win.refresh = setTimeout(() => void this.refresh(win), this.d.inventoryRefreshMs ?? 2_000);
    win.refresh.unref?.();
  }

  /**
   * Listens to the shared informer of one kind in one namespace. Only changes after a list landed
   * are judged (the listed objects are no writes), and the informer hands each one the object as
   * cached before it (its managedFields are the write's proof). Resolves once the first list was
   * tried: a kind that cannot be listed holds the window's other watches up no longer.
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
      void this.judge(win, obj as k8s.KubernetesObject, previous?.metadata.managedFields);
    });
    win.watches.set(key, { handle, off });
    await handle.informer.start();
    const since = win.missedSince;
    if (since !== undefined && handle.informer.isSynced())
      for (const obj of handle.informer.list(namespace))
        await this.judge(win, obj as k8s.KubernetesObject, undefined, since);
  }

  /** `since`: judging an object as listed (no version before), for a write made at or after it. */
  private async judge(
    win: Window,
    obj: k8s.KubernetesObject,
    previous: unknown[] | undefined,
    since?: string,
  ) {
    const m = obj.metadata ?? {};
    const id = `${m.namespace ?? ""}/${m.name}/${obj.kind}`;
    const labels = m.labels ?? {};
    const ours =
      win.ids.has(id) ||
      (labels[OWNER_NAME] === win.kustomization.name &&
        labels[OWNER_NAMESPACE] === win.kustomization.namespace);
    if (!ours) return;
    const found = applierWriteOf(obj as never, this.managers, previous);
    const write = found && (since === undefined || writtenSince(found, since)) ? found : undefined;
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
    if (!write) return;
    const dedupe = `${m.uid}@${write.resourceVersion}`;
    if (win.seen.has(dedupe)) return;
    win.seen.add(dedupe);
    try {
      await this.d.reporter.applierWrite({
        token: win.token,
        claim: win.claim,
        branchKey: win.branchKey,
        object: {
          apiVersion: obj.apiVersion ?? "",
          kind: obj.kind ?? "",
          ...(m.namespace ? { namespace: m.namespace } : {}),
          name: m.name ?? "",
        },
        manager: write.manager,
        writtenAt: write.writtenAt,
        resourceVersion: write.resourceVersion,
        observedAt: this.d.now().toISOString(),
      });
    } catch (err) {
      this.d.log.warn({ err: (err as Error).message, token: win.token }, "could not report an applier write");
    }
  }
}
