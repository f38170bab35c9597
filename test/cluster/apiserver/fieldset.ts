/**
 * Field sets as server-side apply keeps them: a set of paths into an object, each path a list of
 * FieldsV1 elements (`f:name`, `k:{"type":"Ready"}`, `v:"value"`). Conversion to and from the
 * FieldsV1 tree stored in managedFields, and the object walks SSA needs. Pure functions.
 */
import { isDeepStrictEqual } from "node:util";
import { clone } from "./clone.js";
import { childSchema, isAtomicMap, itemSchema, type ListKind, listKind } from "./schema.js";
import type { JsonObject, SchemaNode } from "./types.js";

export type PathElement = string;
/** A path serialised as one string (elements joined by NUL) so sets of paths are plain Sets. */
export type PathKey = string;
export type FieldSet = Set<PathKey>;

const SEP = "\u0000";

export const pathKey = (path: PathElement[]): PathKey => path.join(SEP);
export const pathOf = (key: PathKey): PathElement[] => (key === "" ? [] : key.split(SEP));
export const isUnder = (key: PathKey, prefix: PathKey): boolean =>
  key === prefix || key.startsWith(prefix + SEP);

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Stable JSON with sorted keys, as FieldsV1 key elements are written. */
function canonical(v: unknown): string {
  if (isPlainObject(v)) {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`)
      .join(",")}}`;
  }
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  return JSON.stringify(v);
}

/** Equal as JSON values: same keys and values, in any key order. */
export function deepEqual(a: unknown, b: unknown): boolean {
  return isDeepStrictEqual(a, b);
}

type MapList = Extract<ListKind, { type: "map" }>;

/** The key fields of a map list's item, a left-out one at its default. */
function keyOf(item: Record<string, unknown>, kind: MapList): Record<string, unknown> {
  const picked: Record<string, unknown> = {};
  for (const k of kind.keys) {
    const v = item[k] ?? kind.keyDefaults[k];
    if (v !== undefined) picked[k] = v;
  }
  return picked;
}

function keyElement(item: Record<string, unknown>, kind: MapList): PathElement {
  return `k:${canonical(keyOf(item, kind))}`;
}

/**
 * Fields a walk leaves out: identity and server-owned metadata are never owned by anyone
 * (`generateName` is: a real server records `f:generateName` for the create that set it).
 */
const unownedMetadata = new Set([
  "name",
  "namespace",
  "uid",
  "resourceVersion",
  "generation",
  "creationTimestamp",
  "deletionTimestamp",
  "deletionGracePeriodSeconds",
  "managedFields",
  "selfLink",
]);

export interface WalkOptions {
  /** Only walk this top-level field (e.g. "status" for the status subresource). */
  only?: string;
  /** Skip these top-level fields (e.g. "status" on a resource with a status subresource). */
  skip?: string[];
}

interface Visit {
  path: PathElement[];
  value: unknown;
  /** A leaf: a scalar, an atomic list or map, an empty object, or a set element. */
  leaf: boolean;
}

/** Visits every node that can be owned: maps and list items (non-leaves) and leaves. */
function walk(
  obj: unknown,
  schema: SchemaNode | undefined,
  opts: WalkOptions,
  visit: (v: Visit) => void,
): void {
  const go = (v: unknown, node: SchemaNode | undefined, path: PathElement[], depth: number) => {
    if (isPlainObject(v)) {
      const keys = Object.keys(v);
      if (depth > 0 && (keys.length === 0 || isAtomicMap(node))) {
        visit({ path, value: v, leaf: true });
        return;
      }
      if (depth > 0) visit({ path, value: v, leaf: false });
      for (const key of keys) {
        if (depth === 0) {
          if (key === "apiVersion" || key === "kind") continue;
          if (opts.only !== undefined && key !== opts.only) continue;
          if (opts.skip?.includes(key)) continue;
        }
        if (depth === 1 && path[0] === "f:metadata" && unownedMetadata.has(key)) continue;
        go(v[key], childSchema(node, key, depth === 0), [...path, `f:${key}`], depth + 1);
      }
      return;
    }
    if (Array.isArray(v)) {
      const kind = listKind(node);
      if (kind.type === "atomic" || v.length === 0) {
        visit({ path, value: v, leaf: true });
        return;
      }
      visit({ path, value: v, leaf: false });
      for (const item of v) {
        if (kind.type === "set") {
          visit({ path: [...path, `v:${canonical(item)}`], value: item, leaf: true });
        } else if (kind.type === "map" && isPlainObject(item)) {
          const itemPath = [...path, keyElement(item, kind)];
          visit({ path: itemPath, value: item, leaf: false });
          for (const key of Object.keys(item)) {
            go(item[key], childSchema(itemSchema(node), key), [...itemPath, `f:${key}`], depth + 2);
          }
        }
      }
      return;
    }
    if (depth > 0) visit({ path, value: v, leaf: true });
  };
  go(obj, schema, [], 0);
}

/**
 * The fields an applied configuration sets: its leaves and its associative list items (a map
 * or list that only holds other fields is not owned by itself, as with the real server).
 */
export function appliedFieldSet(
  obj: unknown,
  schema: SchemaNode | undefined,
  opts: WalkOptions = {},
): FieldSet {
  const set: FieldSet = new Set();
  walk(obj, schema, opts, ({ path, leaf }) => {
    const last = path[path.length - 1] ?? "";
    if (leaf || last.startsWith("k:")) set.add(pathKey(path));
  });
  return set;
}

/** Every node of an object with its value, for comparisons between two versions. */
export function nodesOf(
  obj: unknown,
  schema: SchemaNode | undefined,
  opts: WalkOptions = {},
): Map<PathKey, Visit> {
  const nodes = new Map<PathKey, Visit>();
  walk(obj, schema, opts, (v) => nodes.set(pathKey(v.path), v));
  return nodes;
}

const isEmptyContainer = (v: unknown) =>
  v === null || (Array.isArray(v) && v.length === 0) || (isPlainObject(v) && Object.keys(v).length === 0);

/**
 * What an Update changed: leaves that are new or hold a new value, and containers that did not
 * exist before (owned with ".", as the real server records them). Also the paths removed.
 */
export function updateDiff(
  before: unknown,
  after: unknown,
  schema: SchemaNode | undefined,
  opts: WalkOptions = {},
): { changed: FieldSet; removed: FieldSet } {
  const old = nodesOf(before, schema, opts);
  const now = nodesOf(after, schema, opts);
  const changed: FieldSet = new Set();
  for (const [key, node] of now) {
    const prev = old.get(key);
    if (!prev) {
      if (key !== "f:metadata") changed.add(key); // metadata always exists; it is never owned itself
    } else if (node.leaf && !deepEqual(prev.value, node.value)) changed.add(key);
    else if (node.leaf !== prev.leaf && !isEmptyContainer(prev.value)) changed.add(key);
    // An empty (or null) map or list that gains members was there already: only the members are
    // new (a Go struct or list that is never left out, `spec.strategy: {}`, is not owned when filled).
  }
  const removed: FieldSet = new Set();
  for (const key of old.keys()) if (!now.has(key)) removed.add(key);
  return { changed, removed };
}

export function toFieldsV1(set: FieldSet): JsonObject {
  const root: JsonObject = {};
  const members = [...set].map(pathOf);
  for (const path of members) {
    let node = root;
    for (const el of path) {
      if (!isPlainObject(node[el])) node[el] = {};
      node = node[el] as JsonObject;
    }
  }
  for (const path of members) {
    let node = root;
    for (const el of path) node = node[el] as JsonObject;
    if (Object.keys(node).some((k) => k !== ".")) node["."] = {};
  }
  return sortTree(root);
}

function sortTree(node: JsonObject): JsonObject {
  const out: JsonObject = {};
  const keys = Object.keys(node).sort((a, b) =>
    a === "." ? -1 : b === "." ? 1 : a < b ? -1 : a > b ? 1 : 0,
  );
  for (const k of keys) out[k] = sortTree(node[k] as JsonObject);
  return out;
}

export function fromFieldsV1(tree: JsonObject | undefined): FieldSet {
  const set: FieldSet = new Set();
  const go = (node: JsonObject, path: PathElement[]) => {
    const keys = Object.keys(node);
    if (path.length > 0 && (keys.length === 0 || keys.includes("."))) set.add(pathKey(path));
    for (const k of keys) if (k !== ".") go((node[k] ?? {}) as JsonObject, [...path, k]);
  };
  if (tree) go(tree, []);
  return set;
}

/** Human form of a path for messages: `.spec.a`, `.status.conditions[type="Ready"]`. */
export function describePath(key: PathKey): string {
  let out = "";
  for (const el of pathOf(key)) {
    if (el.startsWith("f:")) out += `.${el.slice(2)}`;
    else if (el.startsWith("k:")) {
      const keys = JSON.parse(el.slice(2)) as Record<string, unknown>;
      out += `[${Object.entries(keys)
        .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
        .join(",")}]`;
    } else if (el.startsWith("v:")) out += `[=${el.slice(2)}]`;
    else out += `[${el}]`;
  }
  return out;
}

function findItem(list: unknown[], el: PathElement): number {
  if (el.startsWith("k:")) {
    const keys = JSON.parse(el.slice(2)) as Record<string, unknown>;
    return list.findIndex(
      (item) => isPlainObject(item) && Object.entries(keys).every(([k, v]) => deepEqual(item[k], v)),
    );
  }
  if (el.startsWith("v:")) {
    const want = JSON.parse(el.slice(2));
    return list.findIndex((item) => deepEqual(item, want));
  }
  return -1;
}

export function getAt(obj: unknown, key: PathKey): { found: boolean; value?: unknown } {
  let cur: unknown = obj;
  for (const el of pathOf(key)) {
    if (el.startsWith("f:") && isPlainObject(cur)) {
      const name = el.slice(2);
      if (!(name in cur)) return { found: false };
      cur = cur[name];
    } else if (Array.isArray(cur)) {
      const i = findItem(cur, el);
      if (i < 0) return { found: false };
      cur = cur[i];
    } else return { found: false };
  }
  return { found: true, value: cur };
}

/** Removes the node at a path; containers left empty by the removal are removed too. */
export function removeAt(obj: unknown, key: PathKey): void {
  const path = pathOf(key);
  const parents: { container: unknown; el: PathElement }[] = [];
  let cur: unknown = obj;
  for (const el of path) {
    parents.push({ container: cur, el });
    if (el.startsWith("f:") && isPlainObject(cur)) cur = cur[el.slice(2)];
    else if (Array.isArray(cur)) cur = cur[findItem(cur, el)];
    else return;
    if (cur === undefined) return;
  }
  for (let i = parents.length - 1; i >= 0; i--) {
    const { container, el } = parents[i]!;
    if (isPlainObject(container)) delete container[el.slice(2)];
    else if (Array.isArray(container)) {
      const idx = findItem(container, el);
      if (idx >= 0) container.splice(idx, 1);
    }
    const empty = isPlainObject(container)
      ? Object.keys(container).length === 0
      : Array.isArray(container) && container.length === 0;
    // stop at the root and at the first container that still holds something
    if (i === 0 || !empty || i <= 1) break;
  }
}

/**
 * Merges an applied configuration into a live object as SSA does: maps merge field by field,
 * associative lists merge item by item, sets take the union, everything else is replaced.
 */
export function mergeApplied(
  live: unknown,
  applied: unknown,
  schema: SchemaNode | undefined,
  depth = 0,
): unknown {
  if (isPlainObject(applied)) {
    if (!isPlainObject(live) || (depth > 0 && isAtomicMap(schema))) return clone(applied);
    const out: Record<string, unknown> = { ...live };
    for (const [k, v] of Object.entries(applied)) {
      if (v === null) {
        delete out[k];
        continue;
      }
      out[k] = mergeApplied(live[k], v, childSchema(schema, k, depth === 0), depth + 1);
    }
    return out;
  }
  if (Array.isArray(applied)) {
    const kind: ListKind = listKind(schema);
    if (kind.type === "atomic" || !Array.isArray(live)) return clone(applied);
    const out = [...live];
    for (const item of applied) {
      if (kind.type === "set") {
        if (!out.some((x) => deepEqual(x, item))) out.push(item);
      } else if (isPlainObject(item)) {
        const key = canonical(keyOf(item, kind));
        const i = out.findIndex((x) => isPlainObject(x) && canonical(keyOf(x, kind)) === key);
        if (i < 0) out.push(clone(item));
        else out[i] = mergeApplied(out[i], item, itemSchema(schema), depth + 1);
      }
    }
    return out;
  }
  return applied;
}
