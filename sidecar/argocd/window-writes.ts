/**
 * Which object writes are Argo CD's own apply, for the apply window (pure). An object belongs to
 * an Application by its tracking annotation (`<instance>:<group>/<kind>:<namespace>/<name>`); a
 * write is Argo CD's when its managers alone made it (`applierWriteOf` with ARGO_MANAGERS):
 * argocd-controller for client- and server-side apply, argocd-application-controller for a
 * Replace=true sync, named from the user agent.
 */
import { APPLIER_FIELD_MANAGERS } from "../../queue/contract.js";
import type { WatchedObject } from "../window-observer.js";
import { TRACKING_ANNOTATION } from "./application.js";

export const ARGO_MANAGERS = APPLIER_FIELD_MANAGERS.argocd;

/** The Argo CD instance named by the object's tracking annotation, if any. */
export function trackedInstance(obj: WatchedObject): string | undefined {
  const id = obj.metadata.annotations?.[TRACKING_ANNOTATION];
  if (!id) return undefined;
  const i = id.indexOf(":");
  return i > 0 ? id.slice(0, i) : undefined;
}
