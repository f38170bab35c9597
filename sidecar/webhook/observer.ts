/**
 * The window observer of the webhook applier (sidecar/window-observer.ts): each write to a watched
 * object that the claim's own field managers (`spec.fieldManagers`) alone made is the tool's
 * apply, which the branch worker tells from an edit (and withholds when late over a newer one, a
 * Repair). It watches the kinds it is configured with (`--watch-kinds`; by default ConfigMaps,
 * Services and Deployments, never Secrets), read-only, across all namespaces. A claim that names no
 * field manager opens no window.
 */
import type { WindowOpening } from "../applier-kind.js";
import { type OpenWindow, WatchedKindsObserver } from "../window-observer.js";

/** A webhook operation's window: the claim's field managers are the tool's. */
export interface WebhookWindow extends WindowOpening {
  managers: readonly string[];
}

export class WebhookWindowObserver extends WatchedKindsObserver<WebhookWindow> {
  protected override accepts(w: WebhookWindow): boolean {
    return w.managers.length > 0;
  }

  protected belongs(): boolean {
    return true;
  }

  protected managersOf(win: OpenWindow<WebhookWindow>): readonly string[] {
    return win.managers;
  }
}
