/** The three non-apply patch formats. Pure functions; they throw ApiError on a bad patch. */

import { clone } from "./clone.js";
import { errors } from "./errors.js";

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** RFC 7386 JSON merge patch. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isPlainObject(patch)) return clone(patch);
  const out: Record<string, unknown> = isPlainObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

/**
 * Strategic merge patch, with plain merge semantics for every list (lists are replaced), which is
 * how it behaves for custom resources' fields anyway. `$patch`/`$retainKeys` directives are not
 * understood and are refused so a test relying on them fails loudly.
 */
export function strategicMergePatch(target: unknown, patch: unknown): unknown {
  const check = (v: unknown) => {
    if (isPlainObject(v)) {
      for (const [k, child] of Object.entries(v)) {
        if (k.startsWith("$"))
          throw errors.badRequest(`strategic merge directive ${k} is not supported here`);
        check(child);
      }
    }
  };
  check(patch);
  return mergePatch(target, patch);
}

type Op = { op: string; path: string; value?: unknown; from?: string };

function pointer(path: string): string[] {
  if (path === "") return [];
  if (!path.startsWith("/")) throw errors.badRequest(`invalid JSON pointer "${path}"`);
  return path
    .slice(1)
    .split("/")
    .map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
}

function parentOf(doc: unknown, tokens: string[], path: string): { parent: any; key: string } {
  let cur: any = doc;
  for (const t of tokens.slice(0, -1)) {
    if (Array.isArray(cur)) cur = cur[Number(t)];
    else if (isPlainObject(cur)) cur = cur[t];
    else cur = undefined;
    if (cur === undefined) throw errors.internal(`jsonpatch: path "${path}" does not exist`);
  }
  return { parent: cur, key: tokens[tokens.length - 1] ?? "" };
}

function read(doc: unknown, path: string): unknown {
  let cur: any = doc;
  for (const t of pointer(path)) {
    if (Array.isArray(cur)) cur = cur[Number(t)];
    else if (isPlainObject(cur)) cur = cur[t];
    else cur = undefined;
    if (cur === undefined) throw errors.internal(`jsonpatch: path "${path}" does not exist`);
  }
  return cur;
}

/** RFC 6902 JSON patch. A failed `test` or missing path is an error, as on the real server. */
export function jsonPatch(target: unknown, ops: unknown): unknown {
  if (!Array.isArray(ops)) throw errors.badRequest("the JSON patch must be an array of operations");
  let doc = clone(target);
  for (const raw of ops as Op[]) {
    const tokens = pointer(raw.path);
    if (tokens.length === 0) {
      if (raw.op === "add" || raw.op === "replace") doc = clone(raw.value);
      continue;
    }
    const remove = (path: string) => {
      const { parent, key } = parentOf(doc, pointer(path), path);
      if (Array.isArray(parent)) {
        const i = Number(key);
        if (!(i >= 0 && i < parent.length))
          throw errors.internal(`jsonpatch remove: index out of range "${path}"`);
        return parent.splice(i, 1)[0];
      }
      if (!isPlainObject(parent) || !(key in parent))
        throw errors.internal(`jsonpatch remove operation does not apply: doc is missing path: "${path}"`);
      const v = parent[key];
      delete parent[key];
      return v;
    };
    const add = (path: string, value: unknown) => {
      const { parent, key } = parentOf(doc, pointer(path), path);
      if (Array.isArray(parent)) {
        const i = key === "-" ? parent.length : Number(key);
        if (!(i >= 0 && i <= parent.length))
          throw errors.internal(`jsonpatch add: index out of range "${path}"`);
        parent.splice(i, 0, clone(value));
      } else if (isPlainObject(parent)) parent[key] = clone(value);
      else throw errors.internal(`jsonpatch add operation does not apply: doc is missing path: "${path}"`);
    };
    switch (raw.op) {
      case "add":
        add(raw.path, raw.value);
        break;
      case "remove":
        remove(raw.path);
        break;
      case "replace":
        read(doc, raw.path);
        remove(raw.path);
        add(raw.path, raw.value);
        break;
      case "move": {
        const v = remove(raw.from ?? "");
        add(raw.path, v);
        break;
      }
      case "copy":
        add(raw.path, read(doc, raw.from ?? ""));
        break;
      case "test":
        if (JSON.stringify(read(doc, raw.path)) !== JSON.stringify(raw.value))
          throw errors.invalid({ group: "", plural: "", kind: "", name: "" }, [
            { message: `testing value ${raw.path} failed: test failed` },
          ]);
        break;
      default:
        throw errors.badRequest(`unknown JSON patch operation "${raw.op}"`);
    }
  }
  return doc;
}
