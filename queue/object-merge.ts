/**
 * A write that names what it changed: the change from the object as the writer saw it before its
 * edit (`base`) to the object after it (`next`), carried over the object Git holds now
 * (`current`). A field the writer did not change keeps Git's value, whatever the writer's copy
 * of it says; a field it changed, added or removed takes the writer's value (the writer wins a
 * field Git also changed since the base). Pure; see docs/design/intake.md.
 *
 * The rules, per key of a map (at any depth):
 * - base and next hold the same value (or both lack the key): the key is Git's, kept as it is;
 * - next lacks the key: it is removed;
 * - next holds a map: merged key by key, the same way (a base or Git value that is no map counts
 *   as an empty map, as a JSON merge patch applies);
 * - anything else (a scalar, null, a list): next's value replaces Git's whole. Lists are never
 *   merged item by item, not even Kubernetes' merge-keyed lists (containers by name).
 */

type JsonMap = Record<string, unknown>;

/** Is this a map (a JSON object), not a list or null? */
export function isMap(v: unknown): v is JsonMap {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/** Structural equality of JSON values (key order ignored, list order kept). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!jsonEqual(a[i], b[i])) return false;
    return true;
  }
  if (isMap(a)) {
    if (!isMap(b)) return false;
    const ka = Object.keys(a);
    if (ka.length !== Object.keys(b).length) return false;
    for (const k of ka) if (!Object.hasOwn(b, k) || !jsonEqual(a[k], b[k])) return false;
    return true;
  }
  return false;
}

const own = (m: JsonMap, k: string): unknown => (Object.hasOwn(m, k) ? m[k] : undefined);

/** Git's object (`current`) with the change from `base` to `next` carried over it; inputs untouched. */
export function mergeChange(base: JsonMap, next: JsonMap, current: JsonMap): JsonMap {
  return mergeChangeFromAny([base], next, current);
}

/**
 * Git's object (`current`) with what `next` changed from every one of `bases` carried over it: a
 * key on which any base agrees with `next` (the same value, or both lacking it) is Git's, kept as
 * it is. For a writer that cannot tell which of several states it saw (a snapshot of a cluster
 * that may hold an older commit's objects), only what no candidate explains is its change; one
 * base is `mergeChange`. Inputs untouched.
 */
export function mergeChangeFromAny(bases: readonly JsonMap[], next: JsonMap, current: JsonMap): JsonMap {
  const out: JsonMap = { ...current };
  const keys = new Set([...bases.flatMap((b) => Object.keys(b)), ...Object.keys(next)]);
  for (const k of keys) {
    const inNext = Object.hasOwn(next, k);
    const n = own(next, k);
    if (bases.some((b) => Object.hasOwn(b, k) === inNext && jsonEqual(own(b, k), n))) continue;
    if (!inNext) {
      delete out[k];
      continue;
    }
    if (isMap(n)) {
      const c = own(current, k);
      const children = bases.map((b) => {
        const v = own(b, k);
        return isMap(v) ? v : {};
      });
      out[k] = mergeChangeFromAny(children, n, isMap(c) ? c : {});
      continue;
    }
    out[k] = n;
  }
  return out;
}

/**
 * The file a write of `next` stores when Git holds `current` and the writer named its change by
 * `base`: the merge, with the object's identity (API version, kind, name, namespace) always the
 * writer's. No base, or nothing in Git to merge onto: `next` whole (an object new to Git, or a
 * write that names no change).
 */
export function mergedObject(
  next: JsonMap,
  base: JsonMap | readonly JsonMap[] | undefined,
  current: JsonMap | undefined,
): JsonMap {
  const bases = base === undefined ? [] : Array.isArray(base) ? base : [base as JsonMap];
  if (bases.length === 0 || !current) return next;
  const merged = mergeChangeFromAny(bases, next, current);
  const meta = isMap(merged.metadata) ? { ...merged.metadata } : {};
  const nextMeta = isMap(next.metadata) ? next.metadata : {};
  meta.name = nextMeta.name;
  if (nextMeta.namespace === undefined) delete meta.namespace;
  else meta.namespace = nextMeta.namespace;
  return { ...merged, apiVersion: next.apiVersion, kind: next.kind, metadata: meta };
}
