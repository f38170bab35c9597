/** Label and field selectors as list and watch accept them. Pure. */
import { errors } from "./errors.js";
import type { KObject } from "./types.js";

export type Matcher = (obj: KObject) => boolean;

/** Parses `a=b,c!=d,e in (x,y),f notin (z),g,!h`. */
export function labelSelector(expr: string | null | undefined): Matcher {
  if (!expr) return () => true;
  const parts: string[] = [];
  let depth = 0;
  let cur = "";
  for (const ch of expr) {
    if (ch === "(") depth++;
    if (ch === ")") depth--;
    if (ch === "," && depth === 0) {
      parts.push(cur);
      cur = "";
    } else cur += ch;
  }
  parts.push(cur);
  const tests = parts
    .map((p) => p.trim())
    .filter(Boolean)
    .map((p): ((l: Record<string, string>) => boolean) => {
      let m = /^(\S+)\s+(in|notin)\s+\((.*)\)$/.exec(p);
      if (m) {
        const [, key, op, list] = m as unknown as [string, string, string, string];
        const values = list.split(",").map((s) => s.trim());
        return op === "in"
          ? (l) => key in l && values.includes(l[key]!)
          : (l) => !(key in l) || !values.includes(l[key]!);
      }
      m = /^([^=!\s]+)\s*(==|=|!=)\s*(\S*)$/.exec(p);
      if (m) {
        const [, key, op, value] = m as unknown as [string, string, string, string];
        return op === "!=" ? (l) => l[key] !== value : (l) => l[key] === value;
      }
      if (p.startsWith("!")) return (l) => !(p.slice(1) in l);
      if (/^[\w./-]+$/.test(p)) return (l) => p in l;
      throw errors.badRequest(`unable to parse requirement: invalid label selector "${expr}"`);
    });
  return (obj) => {
    const labels = obj.metadata.labels ?? {};
    return tests.every((t) => t(labels));
  };
}

/**
 * Field selectors: metadata.name and metadata.namespace (every kind supports these two), and the
 * labels a kind adds (core v1 Events: involvedObject.name, reason, ...). A field the kind does
 * not select by is refused, as the real server refuses it.
 */
export function fieldSelector(
  expr: string | null | undefined,
  labels: Record<string, (o: KObject) => string | undefined> = {},
): Matcher {
  if (!expr) return () => true;
  const tests = expr
    .split(",")
    .map((p) => p.trim())
    .filter(Boolean)
    .map((p) => {
      const m = /^([\w.]+)\s*(==|=|!=)\s*(.*)$/.exec(p);
      if (!m) throw errors.badRequest(`invalid field selector: "${p}"`);
      const [, field, op, value] = m as unknown as [string, string, string, string];
      const read = (o: KObject): string | undefined => {
        if (field === "metadata.name") return o.metadata.name;
        if (field === "metadata.namespace") return o.metadata.namespace ?? "";
        const label = Object.hasOwn(labels, field) ? labels[field] : undefined;
        if (label) return label(o) ?? "";
        throw errors.badRequest(`field label not supported: ${field}`);
      };
      return op === "!=" ? (o: KObject) => read(o) !== value : (o: KObject) => read(o) === value;
    });
  return (obj) => tests.every((t) => t(obj));
}
