/**
 * Which object writes are Argo CD's own apply, for the apply window (pure). An object belongs to
 * an Application by its tracking annotation (`<instance>:<group>/<kind>:<namespace>/<name>`); a
 * write is Argo CD's when the newest managedFields entries are its managers alone
 * (argocd-controller for client- and server-side apply, argocd-application-controller for a
 * Replace=true sync, named from the user agent). A tie with another manager could be the edit
 * itself, so it is not reported as the applier's.
 */
import { APPLIER_FIELD_MANAGERS, type ObjectRef } from "../../queue/contract.js";
import { type ManagedFieldsEntry, TRACKING_ANNOTATION } from "./application.js";

export const ARGO_MANAGERS = APPLIER_FIELD_MANAGERS.argocd;

export interface WatchedObject {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
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

export interface ApplierWrite {
  object: ObjectRef;
  manager: string;
  writtenAt: string;
  resourceVersion: string;
}

/** The newest managedFields time (RFC 3339, whole seconds) and who wrote at it. */
function newest(entries: ManagedFieldsEntry[]): { time: string; managers: string[] } | undefined {
  let best: number | undefined;
  let time = "";
  let managers: string[] = [];
  for (const e of entries) {
    if (!e.time) continue;
    const t = Date.parse(e.time);
    if (Number.isNaN(t)) continue;
    if (best === undefined || t > best) {
      best = t;
      time = e.time;
      managers = [e.manager ?? ""];
    } else if (t === best) managers.push(e.manager ?? "");
  }
  return best === undefined ? undefined : { time, managers };
}

/** Argo CD's write of the object, when the newest entries are its managers alone. */
export function applierWriteOf(obj: WatchedObject): ApplierWrite | undefined {
  const entries = (obj.metadata.managedFields ?? []) as ManagedFieldsEntry[];
  const top = newest(entries);
  if (!top || top.managers.length === 0) return undefined;
  if (!top.managers.every((m) => ARGO_MANAGERS.includes(m))) return undefined;
  return {
    object: {
      apiVersion: obj.apiVersion ?? "",
      kind: obj.kind ?? "",
      ...(obj.metadata.namespace ? { namespace: obj.metadata.namespace } : {}),
      name: obj.metadata.name,
    },
    manager: top.managers[0]!,
    writtenAt: top.time,
    resourceVersion: obj.metadata.resourceVersion ?? "",
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
