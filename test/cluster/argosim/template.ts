/**
 * ApplicationSet template rendering for the list generator: every string of the template gets the
 * element's values, `{{key}}` (fasttemplate) or `{{.key}}` with goTemplate. Nested values, functions
 * and the other generators are not reproduced.
 */
type Params = Record<string, unknown>;

function lookup(params: Params, path: string): unknown {
  let v: unknown = params;
  for (const part of path.split(".")) {
    if (!v || typeof v !== "object") return undefined;
    v = (v as Record<string, unknown>)[part];
  }
  return v;
}

export function renderString(text: string, params: Params, goTemplate: boolean): string {
  const re = goTemplate ? /\{\{-?\s*\.([\w.-]+)\s*-?\}\}/g : /\{\{\s*([\w.-]+)\s*\}\}/g;
  return text.replace(re, (whole, path: string) => {
    const v = lookup(params, path);
    if (v === undefined) return goTemplate ? "<no value>" : whole;
    return typeof v === "string" ? v : JSON.stringify(v);
  });
}

export function renderTemplate<T>(template: T, params: Params, goTemplate: boolean): T {
  const walk = (v: unknown): unknown => {
    if (typeof v === "string") return renderString(v, params, goTemplate);
    if (Array.isArray(v)) return v.map(walk);
    if (v && typeof v === "object") {
      const out: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) out[renderString(k, params, goTemplate)] = walk(x);
      return out;
    }
    return v;
  };
  return walk(template) as T;
}

/** The parameter sets of the list generators (elements; flattened as Argo CD passes them). */
export function listGeneratorParams(generators: unknown[] | undefined): Params[] {
  const out: Params[] = [];
  for (const g of generators ?? []) {
    const elements = (g as { list?: { elements?: unknown[] } }).list?.elements;
    for (const e of elements ?? []) if (e && typeof e === "object") out.push(e as Params);
  }
  return out;
}
