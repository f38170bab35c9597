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

/**
 * A duration as the server's printers write one (k8s.io/apimachinery duration.HumanDuration):
 * about two significant figures, `90s`, `5m30s`, `2h15m`, `3d4h`, `702d`, `2y10d`.
 */
export function humanDuration(ms: number): string {
  const seconds = Math.trunc(ms / 1000);
  if (seconds < -1) return "<invalid>";
  if (seconds < 0) return "0s";
  if (seconds < 120) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 10) return seconds % 60 === 0 ? `${minutes}m` : `${minutes}m${seconds % 60}s`;
  if (minutes < 180) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 8) return minutes % 60 === 0 ? `${hours}h` : `${hours}h${minutes % 60}m`;
  if (hours < 48) return `${hours}h`;
  const days = Math.floor(hours / 24);
  if (hours < 24 * 8) return hours % 24 === 0 ? `${days}d` : `${days}d${hours % 24}h`;
  if (hours < 24 * 365 * 2) return `${days}d`;
  const years = Math.floor(days / 365);
  if (hours < 24 * 365 * 8) return days % 365 === 0 ? `${years}y` : `${years}y${days % 365}d`;
  return `${years}y`;
}

/** The time since an RFC 3339 timestamp as the printers write it; `<unknown>` for none. */
export function since(ts: unknown, now: number): string {
  if (typeof ts !== "string" || ts === "") return "<unknown>";
  const t = Date.parse(ts);
  return Number.isNaN(t) ? "<unknown>" : humanDuration(now - t);
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
  const rowOf = (o: KObject, cells: unknown[]) => ({
    cells,
    ...(include === "None" ? {} : { object: include === "Object" ? o : partial(o) }),
  });
  if (t.table) {
    const printer = t.table;
    return {
      kind: "Table",
      apiVersion: "meta.k8s.io/v1",
      metadata: listMeta,
      columnDefinitions: printer.columns.map((c) => ({
        name: c.name,
        type: c.type,
        format: c.format ?? "",
        description: c.description ?? "",
        priority: c.priority ?? 0,
      })),
      rows: objects.map((o) => rowOf(o, printer.cells(o, now))),
    };
  }
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
    rows: objects.map((o) => rowOf(o, [o.metadata.name, ...cols.map((c) => cell(o, c, now))])),
  };
}

export function wantsTable(accept: string | undefined): boolean {
  return !!accept && /as=Table/.test(accept);
}
