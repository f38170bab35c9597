/** `as=Table` output (what kubectl get prints): columns from printer columns, rows per object. */
import type { KObject, PrinterColumn, ResourceType } from "./types.js";

/** Reads a simple JSONPath like `.status.conditions[?(@.type=="Ready")].status`. */
export function readJsonPath(obj: unknown, path: string): unknown {
  let cur: unknown = obj;
  const re = /\.([\w-]+)|\[\?\(@\.([\w-]+)==["']([^"']*)["']\)\]|\[(\d+)\]/g;
  for (const m of path.matchAll(re)) {
    if (cur === undefined || cur === null) return undefined;
    if (m[1] !== undefined) cur = (cur as Record<string, unknown>)[m[1]];
    else if (m[2] !== undefined) {
      cur = Array.isArray(cur) ? cur.find((x) => x?.[m[2]!] === m[3]) : undefined;
    } else if (m[4] !== undefined) cur = Array.isArray(cur) ? cur[Number(m[4])] : undefined;
  }
  return cur;
}

function age(ts: string | undefined, now: number): string {
  if (!ts) return "<unknown>";
  const s = Math.max(0, Math.floor((now - Date.parse(ts)) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  if (s < 172800) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

function columns(t: ResourceType): PrinterColumn[] {
  const cols = [...t.printerColumns];
  if (!t.crdName && !cols.some((c) => c.name === "Age"))
    cols.push({ name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" });
  return cols;
}

function cell(obj: KObject, c: PrinterColumn, now: number): unknown {
  const v = readJsonPath(obj, c.jsonPath);
  if (c.type === "date") return age(v as string | undefined, now);
  if (v === undefined || v === null) return c.type === "string" ? "" : null;
  return typeof v === "object" ? JSON.stringify(v) : v;
}

function partial(obj: KObject) {
  const { managedFields: _m, ...metadata } = obj.metadata;
  return { kind: "PartialObjectMetadata", apiVersion: "meta.k8s.io/v1", metadata };
}

export function toTable(
  t: ResourceType,
  objects: KObject[],
  listMeta: Record<string, unknown>,
  include: string | null,
  now: number,
) {
  const cols = columns(t);
  return {
    kind: "Table",
    apiVersion: "meta.k8s.io/v1",
    metadata: listMeta,
    columnDefinitions: [
      {
        name: "Name",
        type: "string",
        format: "name",
        description: "Name must be unique within a namespace.",
        priority: 0,
      },
      ...cols.map((c) => ({
        name: c.name,
        type: c.type,
        format: c.format ?? "",
        description: c.description ?? "",
        priority: c.priority ?? 0,
      })),
    ],
    rows: objects.map((o) => ({
      cells: [o.metadata.name, ...cols.map((c) => cell(o, c, now))],
      ...(include === "None" ? {} : { object: include === "Object" ? o : partial(o) }),
    })),
  };
}

export function wantsTable(accept: string | undefined): boolean {
  return !!accept && /as=Table/.test(accept);
}
