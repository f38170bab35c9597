/** status.inventory of a Kustomization: one entry per applied object (pure). */
export interface InventoryEntry {
  /** `<namespace>_<name>_<group>_<kind>`, namespace and group empty when there is none. */
  id: string;
  /** The API version the object was applied at. */
  v: string;
}

export interface ObjectRef {
  namespace: string;
  name: string;
  group: string;
  version: string;
  kind: string;
}

export function splitApiVersion(apiVersion: string): { group: string; version: string } {
  const i = apiVersion.indexOf("/");
  return i < 0
    ? { group: "", version: apiVersion }
    : { group: apiVersion.slice(0, i), version: apiVersion.slice(i + 1) };
}

export function entryOf(ref: ObjectRef): InventoryEntry {
  return { id: `${ref.namespace}_${ref.name}_${ref.group}_${ref.kind}`, v: ref.version };
}

export function refOf(entry: InventoryEntry): ObjectRef {
  // Names and namespaces hold no "_" (DNS labels/subdomains), and kinds none either.
  const [namespace = "", name = "", group = "", kind = ""] = entry.id.split("_");
  return { namespace, name, group, kind, version: entry.v };
}

export function apiVersionOf(ref: ObjectRef): string {
  return ref.group ? `${ref.group}/${ref.version}` : ref.version;
}

/** Entries of `before` that `after` no longer holds: what a prune deletes. */
export function staleEntries(before: InventoryEntry[], after: InventoryEntry[]): InventoryEntry[] {
  const keep = new Set(after.map((e) => e.id));
  return before.filter((e) => !keep.has(e.id));
}

export function sortEntries(entries: InventoryEntry[]): InventoryEntry[] {
  return [...entries].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}
