/**
 * Events are one resource under two groups, as on a real API server: core v1 Events are stored,
 * events.k8s.io/v1 Events are the same objects converted field by field (the conversion of
 * k8s.io/kubernetes pkg/apis/events/v1). An Event recorded through either group is listed,
 * watched, selected and described through both, at the same resourceVersion. Pure.
 */
import type { KObject } from "./types.js";

/** core v1 field ↔ events.k8s.io/v1 field; every other field has one name in both. */
const RENAMED: readonly (readonly [core: string, v1: string])[] = [
  ["involvedObject", "regarding"],
  ["message", "note"],
  ["reportingComponent", "reportingController"],
  ["source", "deprecatedSource"],
  ["firstTimestamp", "deprecatedFirstTimestamp"],
  ["lastTimestamp", "deprecatedLastTimestamp"],
  ["count", "deprecatedCount"],
];

function rename(o: KObject, pairs: readonly (readonly [from: string, to: string])[]): KObject {
  const out: KObject = { ...o };
  // Neither shape's own names survive under the other's: a field is carried only by its pair.
  for (const [from, to] of pairs) {
    delete out[from];
    delete out[to];
  }
  for (const [from, to] of pairs) if (o[from] !== undefined) out[to] = o[from];
  return out;
}

/** A stored (core v1) Event as events.k8s.io/v1 shows it. */
export function eventFromCore(o: KObject): KObject {
  return rename(o, RENAMED);
}

/** An events.k8s.io/v1 Event as it is stored (core v1). */
export function eventToCore(o: KObject): KObject {
  return rename(
    o,
    RENAMED.map(([core, v1]) => [v1, core] as const),
  );
}

type FieldReader = (o: KObject) => string | undefined;

const field =
  (...path: string[]): FieldReader =>
  (o) => {
    let v: unknown = o;
    for (const p of path) v = v && typeof v === "object" ? (v as Record<string, unknown>)[p] : undefined;
    return v === undefined || v === null ? "" : String(v);
  };

const REFERENCE_FIELDS = ["kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath"];

/** Field selector labels core v1 Events accept beyond metadata.name and metadata.namespace. */
export const CORE_EVENT_FIELDS: Record<string, FieldReader> = {
  ...Object.fromEntries(REFERENCE_FIELDS.map((f) => [`involvedObject.${f}`, field("involvedObject", f)])),
  reason: field("reason"),
  reportingComponent: field("reportingComponent"),
  source: field("source", "component"),
  type: field("type"),
};

/** Field selector labels events.k8s.io/v1 Events accept (the same fields, under their v1 names). */
export const V1_EVENT_FIELDS: Record<string, FieldReader> = {
  ...Object.fromEntries(REFERENCE_FIELDS.map((f) => [`regarding.${f}`, field("regarding", f)])),
  reason: field("reason"),
  reportingController: field("reportingController"),
  type: field("type"),
};
