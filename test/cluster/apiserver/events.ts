/**
 * Events are one resource under two groups, as on a real API server: core v1 Events are stored,
 * events.k8s.io/v1 Events are the same objects converted field by field (the conversion of
 * k8s.io/kubernetes pkg/apis/events/v1). An Event recorded through either group is listed,
 * watched, selected and described through both, at the same resourceVersion. Pure.
 */

import { clone } from "./clone.js";
import { since } from "./table.js";
import type { KObject, TableColumn, TablePrinter } from "./types.js";

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

/** Fields a Go struct always writes, at their zero value when unset (`null` for a time). */
function withZero(o: KObject, zero: Record<string, unknown>, omitEmpty: readonly string[]): KObject {
  const out: KObject = { ...o };
  for (const [k, v] of Object.entries(zero))
    if (out[k] === undefined || (out[k] === null && v !== null)) out[k] = clone(v);
  for (const k of omitEmpty) if (out[k] === "" || out[k] === 0 || out[k] === null) delete out[k];
  return out;
}

/**
 * A core v1 Event as k8s.io/api's core/v1 Event type writes it: `involvedObject` and `source`
 * are structs (`{}` when unset), the three times are non-pointer times (`null`), and
 * `reportingComponent` and `reportingInstance` are not omitempty (`""`).
 */
export function coreEventShape(o: KObject): KObject {
  return withZero(
    o,
    {
      involvedObject: {},
      source: {},
      firstTimestamp: null,
      lastTimestamp: null,
      eventTime: null,
      reportingComponent: "",
      reportingInstance: "",
    },
    ["count", "message", "reason", "type", "action"],
  );
}

/**
 * An events.k8s.io/v1 Event as its Go type writes it: `eventTime` is not omitempty (`null`),
 * `regarding` and `deprecatedSource` are structs (`{}`), the deprecated times are non-pointer
 * times (`null`); the reporting fields and `deprecatedCount` are omitempty.
 */
export function v1EventShape(o: KObject): KObject {
  return withZero(
    o,
    {
      eventTime: null,
      regarding: {},
      deprecatedSource: {},
      deprecatedFirstTimestamp: null,
      deprecatedLastTimestamp: null,
    },
    ["reportingController", "reportingInstance", "deprecatedCount", "note", "reason", "type", "action"],
  );
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

const str = (v: unknown): string => (typeof v === "string" ? v : "");
const obj = (v: unknown): Record<string, unknown> =>
  v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : {};

/** One row of the server's Event table, from the core v1 shape (k8s.io/kubernetes printEvent). */
function eventCells(o: KObject, now: number): unknown[] {
  const first = o.firstTimestamp ? since(o.firstTimestamp, now) : since(o.eventTime, now);
  let last = o.lastTimestamp ? since(o.lastTimestamp, now) : first;
  let count = typeof o.count === "number" ? o.count : 0;
  const series = o.series as { count?: number; lastObservedTime?: string } | undefined | null;
  if (series) {
    last = since(series.lastObservedTime, now);
    count = series.count ?? 0;
  } else if (count === 0) count = 1; // a singleton of the new API has no count
  const ref = obj(o.involvedObject);
  const kind = str(ref.kind).toLowerCase();
  const target = str(ref.name) ? `${kind}/${str(ref.name)}` : kind;
  const source = obj(o.source);
  const component = str(source.component) || str(o.reportingComponent);
  const instance = str(source.host) || str(o.reportingInstance);
  return [
    last,
    str(o.type),
    str(o.reason),
    target,
    str(ref.fieldPath),
    instance ? `${component}, ${instance}` : component,
    str(o.message).trim(),
    first,
    count,
    o.metadata.name,
  ];
}

const EVENT_COLUMNS: TableColumn[] = [
  {
    name: "Last Seen",
    type: "string",
    description: "The time at which the most recent occurrence of this event was recorded.",
  },
  {
    name: "Type",
    type: "string",
    description: "Type of this event (Normal, Warning), new types could be added in the future",
  },
  {
    name: "Reason",
    type: "string",
    description:
      "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
  },
  { name: "Object", type: "string", description: "The object that this event is about." },
  {
    name: "Subobject",
    type: "string",
    priority: 1,
    description: "If referring to a piece of an object instead of an entire object, the field path.",
  },
  {
    name: "Source",
    type: "string",
    priority: 1,
    description: "The component reporting this event. Should be a short machine understandable string.",
  },
  {
    name: "Message",
    type: "string",
    description: "A human-readable description of the status of this operation.",
  },
  {
    name: "First Seen",
    type: "string",
    priority: 1,
    description: "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
  },
  { name: "Count", type: "string", priority: 1, description: "The number of times this event has occurred." },
  {
    name: "Name",
    type: "string",
    format: "name",
    priority: 1,
    description: "Name must be unique within a namespace.",
  },
];

/**
 * The server's Table of Events, for both groups (an events.k8s.io/v1 Event is printed from its
 * core v1 form): `LAST SEEN  TYPE  REASON  OBJECT  MESSAGE`, the rest at priority 1 (`-o wide`),
 * no leading Name column. Times as the printers write them, from lastTimestamp (else the first
 * time), firstTimestamp (else eventTime), or the series' last observation.
 */
export const CORE_EVENT_TABLE: TablePrinter = { columns: EVENT_COLUMNS, cells: eventCells };
export const V1_EVENT_TABLE: TablePrinter = {
  columns: EVENT_COLUMNS,
  cells: (o, now) => eventCells(eventToCore(o), now),
};
