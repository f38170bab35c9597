/**
 * Which object writes are Argo CD's own apply, for the apply window (pure). An object belongs to
 * an Application by its tracking annotation (`<instance>:<group>/<kind>:<namespace>/<name>`); a
 * write is Argo CD's when its managers alone touched managedFields entries since the version seen
 * before (argocd-controller for client- and server-side apply, argocd-application-controller for
 * a Replace=true sync, named from the user agent); with no version before, when the newest entries
 * are its managers alone, and a tie with another manager could be the edit itself.
 */
import { APPLIER_FIELD_MANAGERS, type ObjectRef } from "../../queue/contract.js";
import { type ApplierWrite as OwnWrite, applierWriteOf as ownWriteOf } from "../applier-write.js";
import { TRACKING_ANNOTATION } from "./application.js";

export const ARGO_MANAGERS = APPLIER_FIELD_MANAGERS.argocd;

export interface WatchedObject {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    annotations?: Record<string, string>;
    managedFields?: unknown[];
  };
}

/** The Argo CD instance named by the object's tracking annotation, if any. */
export function trackedInstance(obj: WatchedObject): string | undefined {
  const id = obj.metadata.annotations?.[TRACKING_ANNOTATION];
  if (!id) return undefined;
  const i = id.indexOf(":");
  return i > 0 ? id.slice(0, i) : undefined;
}

export interface ApplierWrite extends OwnWrite {
  object: ObjectRef;
}

/**
 * Argo CD's write of the object: its managers alone touched entries since `previous` (the
 * managedFields last seen), or without it, the newest entries are its managers alone.
 */
export function applierWriteOf(obj: WatchedObject, previous?: unknown[]): ApplierWrite | undefined {
  const write = ownWriteOf(obj, ARGO_MANAGERS, previous);
  if (!write) return undefined;
  return {
    object: {
      apiVersion: obj.apiVersion ?? "",
      kind: obj.kind ?? "",
      ...(obj.metadata.namespace ? { namespace: obj.metadata.namespace } : {}),
      name: obj.metadata.name,
    },
    ...write,
  };
}

/** An open (or just closed) apply window of one Application. */
export interface OpenWindow {
  token: string;
  instance: string;
  claim: { kind: "ArgoCDClaim"; namespace: string; name: string };
  branchKey: string;
  /** When the operation completed; reports go on until `closedAt + grace`. */
  closedAt?: number;
}

/** The windows that a write to this object at `now` belongs to. */
export function windowsFor(obj: WatchedObject, windows: Iterable<OpenWindow>, now: number, graceMs: number) {
  const instance = trackedInstance(obj);
  if (!instance) return [];
  const out: OpenWindow[] = [];
  for (const w of windows) {
    if (w.instance !== instance) continue;
    if (w.closedAt !== undefined && now > w.closedAt + graceMs) continue;
    out.push(w);
  }
  return out;
}
