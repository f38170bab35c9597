/**
 * A snapshot's prune sweep (pure): which files of a swept kind and namespace in a GitTarget's
 * folder hold objects that are no longer live and that the sweeping rule selects. A file that
 * does not parse as that kind, or that another kind sits in, is left alone: the sweep deletes
 * only what it can tell is the rule's.
 */
import { parse } from "yaml";
import type { ObjectRef, SnapshotSweep } from "../contract.js";
import { matchesSelector } from "../selector.js";
import { CLUSTER_SCOPE_DIR, CORE_GROUP_DIR, groupOf } from "./layout.js";

/** The folders a sweep lists, relative to the repository root, with the namespace each holds. */
export function sweptDirs(folder: string, sweep: SnapshotSweep): { dir: string; namespace?: string }[] {
  const base = folder === "." || folder === "" ? "" : `${folder.replace(/^\/+|\/+$/g, "")}/`;
  const kindDir = `${base}${groupOf(sweep.apiVersion) || CORE_GROUP_DIR}/${sweep.kind.toLowerCase()}`;
  if (sweep.namespaces.length === 0) return [{ dir: `${kindDir}/${CLUSTER_SCOPE_DIR}` }];
  return sweep.namespaces.map((namespace) => ({ dir: `${kindDir}/${namespace}`, namespace }));
}

/** One file found in a swept folder: its name and its content. */
export interface SweptFile {
  name: string;
  content: string;
}

/** The delete changes a sweep makes for the files found in one swept folder. */
export function sweepDeletes(
  sweep: SnapshotSweep,
  namespace: string | undefined,
  files: readonly SweptFile[],
): ObjectRef[] {
  const live = new Set(sweep.live);
  const out: ObjectRef[] = [];
  for (const f of files) {
    if (!f.name.endsWith(".yaml")) continue;
    const name = f.name.slice(0, -".yaml".length);
    if (live.has(`${namespace ?? ""}/${name}`)) continue;
    let doc: unknown;
    try {
      doc = parse(f.content);
    } catch {
      continue;
    }
    const o = doc as {
      apiVersion?: unknown;
      kind?: unknown;
      metadata?: { name?: unknown; namespace?: unknown; labels?: unknown };
    } | null;
    if (!o || typeof o !== "object" || o.kind !== sweep.kind || typeof o.apiVersion !== "string") continue;
    if (groupOf(o.apiVersion) !== groupOf(sweep.apiVersion) || o.metadata?.name !== name) continue;
    if ((o.metadata?.namespace ?? undefined) !== namespace) continue;
    const labels = o.metadata?.labels;
    const labelMap =
      labels && typeof labels === "object" && !Array.isArray(labels)
        ? (labels as Record<string, string>)
        : {};
    if (!matchesSelector(sweep.selector, labelMap)) continue;
    out.push({
      apiVersion: o.apiVersion,
      kind: sweep.kind,
      name,
      ...(namespace ? { namespace } : {}),
    });
  }
  return out.sort((a, b) => a.name.localeCompare(b.name));
}
