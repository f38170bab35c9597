/**
 * The window observer for Argo CD (sidecar/window-observer.ts): an object belongs to an
 * operation's window when it carries the Application's tracking annotation, and a write is Argo
 * CD's when its managers alone made it. It watches the kinds it is configured with (default
 * ConfigMaps, Services, Deployments: never Secrets unless asked), across all namespaces, keeping
 * managedFields only of objects some Application tracks.
 */
import type { WindowOpening } from "../applier-kind.js";
import {
  type OpenWindow,
  type WatchedKindsDeps,
  WatchedKindsObserver,
  type WatchedObject,
} from "../window-observer.js";
import { appInstance } from "./application.js";
import { ARGO_MANAGERS, trackedInstance } from "./window-writes.js";

export { DEFAULT_WATCHED_KINDS, parseWatchKinds, type WatchedKind } from "../watch-kinds.js";

export interface ArgoCDWindowObserverDeps extends WatchedKindsDeps {
  /** Argo CD's own namespace: Applications there track as `<name>`, others as `<ns>_<name>`. */
  controlNamespace?: string;
}

export class ArgoCDWindowObserver extends WatchedKindsObserver<WindowOpening> {
  constructor(private readonly argo: ArgoCDWindowObserverDeps) {
    super(argo);
  }

  protected belongs(win: OpenWindow<WindowOpening>, obj: WatchedObject): boolean {
    return trackedInstance(obj) === appInstance(win.applier, this.argo.controlNamespace ?? "argocd");
  }

  protected managersOf(): readonly string[] {
    return ARGO_MANAGERS;
  }

  protected override remembers(obj: WatchedObject): unknown {
    return trackedInstance(obj);
  }
}
