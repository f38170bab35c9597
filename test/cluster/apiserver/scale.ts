/**
 * The scale subresource (`…/<name>/scale`, kind `autoscaling/v1` Scale): a view of an object's
 * replicas and selector at the paths its type declares. `kubectl scale` patches it. Pure functions.
 */

import { clone } from "./clone.js";
import { errors } from "./errors.js";
import type { KObject, ResourceType, ScaleSubresource } from "./types.js";

const pathOf = (p: string) => p.replace(/^\./, "").split(".");

function read(o: unknown, path: string): unknown {
  let cur = o;
  for (const k of pathOf(path)) cur = (cur as Record<string, unknown> | undefined)?.[k];
  return cur;
}

/** A label selector object in its text form (`app=web,tier in (a,b)`), as the Scale carries it. */
function selectorText(v: unknown): string | undefined {
  if (typeof v === "string") return v;
  if (!v || typeof v !== "object") return undefined;
  const s = v as {
    matchLabels?: Record<string, string>;
    matchExpressions?: { key: string; operator: string; values?: string[] }[];
  };
  const parts = Object.entries(s.matchLabels ?? {}).map(([k, val]) => `${k}=${val}`);
  for (const e of s.matchExpressions ?? []) {
    const values = `(${(e.values ?? []).join(",")})`;
    if (e.operator === "In") parts.push(`${e.key} in ${values}`);
    else if (e.operator === "NotIn") parts.push(`${e.key} notin ${values}`);
    else if (e.operator === "Exists") parts.push(e.key);
    else if (e.operator === "DoesNotExist") parts.push(`!${e.key}`);
  }
  return parts.join(",");
}

function spec(t: ResourceType): ScaleSubresource {
  if (!t.scale) throw errors.notFound({ ...t, name: "scale" });
  return t.scale;
}

/** The Scale an object shows. */
export function scaleOf(t: ResourceType, o: KObject): KObject {
  const s = spec(t);
  const m = o.metadata;
  const selector = s.labelSelectorPath ? selectorText(read(o, s.labelSelectorPath)) : undefined;
  return {
    kind: "Scale",
    apiVersion: "autoscaling/v1",
    metadata: {
      name: m.name,
      namespace: m.namespace,
      uid: m.uid,
      resourceVersion: m.resourceVersion,
      creationTimestamp: m.creationTimestamp,
    },
    spec: { replicas: Number(read(o, s.specReplicasPath) ?? 0) },
    status: { replicas: Number(read(o, s.statusReplicasPath) ?? 0), ...(selector ? { selector } : {}) },
  };
}

/** The replicas a Scale written by a client asks for (a whole, non-negative number). */
export function requestedReplicas(body: unknown, name: string): number {
  const replicas = (body as { spec?: { replicas?: unknown } } | undefined)?.spec?.replicas;
  if (typeof replicas !== "number" || !Number.isInteger(replicas) || replicas < 0)
    throw errors.invalid({ group: "autoscaling", plural: "scale", kind: "Scale", name }, [
      {
        field: "spec.replicas",
        message: `Invalid value: ${JSON.stringify(replicas)}: must be greater than or equal to 0`,
        reason: "FieldValueInvalid",
      },
    ]);
  return replicas;
}

/** The object with its replicas set to `n`. */
export function withReplicas(t: ResourceType, o: KObject, n: number): KObject {
  const out = clone(o);
  const keys = pathOf(spec(t).specReplicasPath);
  let cur = out as Record<string, unknown>;
  for (const k of keys.slice(0, -1)) {
    if (typeof cur[k] !== "object" || cur[k] === null) cur[k] = {};
    cur = cur[k] as Record<string, unknown>;
  }
  cur[keys[keys.length - 1]!] = n;
  return out;
}
