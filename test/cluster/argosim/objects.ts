/** Pure object arithmetic: tracking ids, hook annotations, comparisons and merge patches. */
import { isDeepStrictEqual } from "node:util";
import type { Application, KObj } from "./types.js";

export const TRACKING_ANNOTATION = "argocd.argoproj.io/tracking-id";
export const HOOK_ANNOTATION = "argocd.argoproj.io/hook";
export const HOOK_DELETE_POLICY_ANNOTATION = "argocd.argoproj.io/hook-delete-policy";
export const SYNC_OPTIONS_ANNOTATION = "argocd.argoproj.io/sync-options";
export const REFRESH_ANNOTATION = "argocd.argoproj.io/refresh";
export const LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration";

/** The application instance name: `<ns>_<name>` outside the control-plane namespace. */
export function appInstance(app: Application, controlNamespace: string): string {
  return app.metadata.namespace === controlNamespace
    ? app.metadata.name
    : `${app.metadata.namespace}_${app.metadata.name}`;
}

export const groupOf = (apiVersion: string): string =>
  apiVersion.includes("/") ? (apiVersion.split("/")[0] ?? "") : "";

/** `<app>:<group>/<kind>:<namespace>/<name>`; a cluster-scoped object takes the destination namespace. */
export function trackingId(instance: string, obj: KObj, namespace: string): string {
  return `${instance}:${groupOf(obj.apiVersion)}/${obj.kind}:${namespace}/${obj.metadata.name}`;
}

export function hookType(obj: KObj): string | undefined {
  const v = obj.metadata.annotations?.[HOOK_ANNOTATION];
  return v ? (v.split(",")[0]?.trim() ?? undefined) : undefined;
}

/** DeletePolicies: the annotation's values, BeforeHookCreation when there is none. */
export function hookDeletePolicies(obj: KObj): string[] {
  const v = obj.metadata.annotations?.[HOOK_DELETE_POLICY_ANNOTATION];
  const list = (v ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter((s) => ["BeforeHookCreation", "HookSucceeded", "HookFailed"].includes(s));
  return list.length ? list : ["BeforeHookCreation"];
}

export function hasSyncOption(options: string[] | undefined, obj: KObj | undefined, option: string): boolean {
  if (options?.includes(option)) return true;
  const annotated = obj?.metadata.annotations?.[SYNC_OPTIONS_ANNOTATION];
  return !!annotated && annotated.split(",").some((s) => s.trim() === option);
}

const isPlain = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** Every field of `want` has the same value in `have` (arrays element by element). */
export function isSubset(want: unknown, have: unknown): boolean {
  if (isPlain(want)) return isPlain(have) && Object.entries(want).every(([k, v]) => isSubset(v, have[k]));
  if (Array.isArray(want))
    return Array.isArray(have) && want.length === have.length && want.every((v, i) => isSubset(v, have[i]));
  return isDeepStrictEqual(want, have);
}

/** A JSON merge patch that turns `from` into `to` (members only in `from` become null). */
export function mergeDiff(from: unknown, to: unknown): unknown {
  if (!isPlain(from) || !isPlain(to)) return to;
  const patch: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(to)) {
    if (isDeepStrictEqual(from[k], v)) continue;
    patch[k] = isPlain(from[k]) && isPlain(v) ? mergeDiff(from[k], v) : v;
  }
  for (const k of Object.keys(from)) if (!(k in to)) patch[k] = null;
  return patch;
}

/**
 * kubectl apply's three-way patch: what `desired` changes from the live object, plus a delete of
 * every member the last applied configuration had and `desired` no longer has.
 */
export function threeWayPatch(
  lastApplied: unknown,
  desired: unknown,
  live: unknown,
): Record<string, unknown> {
  const patch: Record<string, unknown> = {};
  const d = isPlain(desired) ? desired : {};
  const l = isPlain(live) ? live : {};
  const o = isPlain(lastApplied) ? lastApplied : {};
  for (const [k, v] of Object.entries(d)) {
    if (isPlain(v) && isPlain(l[k])) {
      const sub = threeWayPatch(o[k], v, l[k]);
      if (Object.keys(sub).length) patch[k] = sub;
    } else if (!isDeepStrictEqual(v, l[k])) patch[k] = v;
  }
  for (const k of Object.keys(o)) if (!(k in d) && k in l) patch[k] = null;
  return patch;
}
