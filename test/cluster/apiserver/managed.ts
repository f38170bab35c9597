/**
 * managedFields bookkeeping: who owns which field, how an Update takes ownership, how an Apply
 * merges, conflicts and drops fields. Pure functions over objects and the clock value given.
 */

import { clone } from "./clone.js";
import { ApiError } from "./errors.js";
import {
  appliedFieldSet,
  deepEqual,
  describePath,
  type FieldSet,
  fromFieldsV1,
  getAt,
  isUnder,
  mergeApplied,
  type PathKey,
  pathKey,
  pathOf,
  removeAt,
  toFieldsV1,
  updateDiff,
  type WalkOptions,
} from "./fieldset.js";
import type { KObject, ManagedFieldsEntry, ResourceType } from "./types.js";

export interface Owner {
  manager: string;
  operation: "Apply" | "Update";
  apiVersion: string;
  /** undefined where the real server writes none (entries made through the scale subresource). */
  time?: string;
  subresource?: string;
  fields: FieldSet;
}

/** The schema ownership and merging read: a custom resource's, or a built-in kind's merge schema. */
const schemaOf = (t: ResourceType) => t.schema ?? t.mergeSchema;

/** The server keeps one entry per manager, operation and subresource (and version for Update). */
function sameEntry(a: Omit<Owner, "fields" | "time">, b: Omit<Owner, "fields" | "time">): boolean {
  return (
    a.manager === b.manager &&
    a.operation === b.operation &&
    (a.subresource ?? "") === (b.subresource ?? "") &&
    (a.operation === "Apply" || a.apiVersion === b.apiVersion)
  );
}

/**
 * The entries as the real server decodes them: one per identity (manager, operation, subresource,
 * and apiVersion for Update), the later in the stored order winning where two share one (a
 * write through the scale subresource can store such a pair; the next write keeps one).
 */
export function readOwners(obj: KObject): Owner[] {
  const owners: Owner[] = [];
  for (const e of obj.metadata.managedFields ?? []) {
    const o: Owner = {
      manager: e.manager,
      operation: e.operation,
      apiVersion: e.apiVersion,
      ...(e.time !== undefined ? { time: e.time } : {}),
      ...(e.subresource ? { subresource: e.subresource } : {}),
      fields: fromFieldsV1(e.fieldsV1),
    };
    const same = owners.findIndex((x) => sameEntry(x, o));
    if (same >= 0) owners.splice(same, 1);
    owners.push(o);
  }
  return owners;
}

/**
 * The order the real server writes entries in (structured-merge-diff's encoding sorts them):
 * operation (Apply before Update), then time to the second, then manager, apiVersion and
 * subresource.
 */
function entryOrder(a: Owner, b: Owner): number {
  const seconds = (o: Owner) => (o.time ? Math.floor(Date.parse(o.time) / 1000) : 0);
  const text = (x: string | undefined, y: string | undefined) =>
    (x ?? "") < (y ?? "") ? -1 : (x ?? "") > (y ?? "") ? 1 : 0;
  return (
    text(a.operation, b.operation) ||
    seconds(a) - seconds(b) ||
    text(a.manager, b.manager) ||
    text(a.apiVersion, b.apiVersion) ||
    text(a.subresource, b.subresource)
  );
}

export function writeOwners(owners: Owner[]): ManagedFieldsEntry[] {
  return owners
    .filter((o) => o.fields.size > 0)
    .sort(entryOrder)
    .map((o) => {
      const entry: ManagedFieldsEntry = {
        manager: o.manager,
        operation: o.operation,
        apiVersion: o.apiVersion,
        ...(o.time !== undefined ? { time: o.time } : {}),
        fieldsType: "FieldsV1",
        fieldsV1: toFieldsV1(o.fields),
      };
      if (o.subresource) entry.subresource = o.subresource;
      return entry;
    });
}

/** The part of an object a request may touch: the status stanza, or everything but status. */
export function scopeOf(type: ResourceType, subresource: string | undefined): WalkOptions {
  if (subresource === "status") return { only: "status" };
  return type.statusSubresource ? { skip: ["status"] } : {};
}

function upsert(owners: Owner[], who: Omit<Owner, "fields">): Owner {
  const found = owners.find((o) => sameEntry(o, who));
  if (found) {
    found.time = who.time;
    found.apiVersion = who.apiVersion;
    return found;
  }
  const created: Owner = { ...who, fields: new Set() };
  owners.push(created);
  return created;
}

export interface Actor {
  manager: string;
  apiVersion: string;
  subresource?: string;
  /** RFC 3339 with seconds, as the server stamps managedFields. */
  time: string;
}

/**
 * Ownership after an Update (create, put, or any non-apply patch): the manager takes every field
 * it changed, away from everybody else; removed fields leave every set.
 */
export function ownersAfterUpdate(
  type: ResourceType,
  before: KObject | undefined,
  after: KObject,
  who: Actor,
  /** For a create: the kind's empty object as its Go type writes it, which is what a create changed. */
  zero: object = {},
): Owner[] {
  const owners = before ? readOwners(before) : [];
  // An update of an object that has no managedFields is not tracked (structured-merge-diff's
  // skip-non-applied manager: tracking starts again with an apply); a create always is.
  if (before && owners.length === 0) return owners;
  const scope = scopeOf(type, who.subresource);
  const { changed, removed } = updateDiff(before ?? zero, after, schemaOf(type), scope);
  for (const o of owners) {
    for (const f of [...o.fields]) {
      if ([...removed].some((r) => isUnder(f, r))) o.fields.delete(f);
      else if (changed.has(f)) o.fields.delete(f);
    }
  }
  if (changed.size > 0) {
    const mine = upsert(owners, { ...who, operation: "Update" });
    for (const f of changed) mine.fields.add(f);
  }
  return owners.filter((o) => o.fields.size > 0);
}

export interface ApplyResult {
  object: KObject;
  owners: Owner[];
}

function conflictText(o: Owner): string {
  let s = `conflict with "${o.manager}"`;
  if (o.subresource) s += ` with subresource "${o.subresource}"`;
  if (o.operation === "Update") s += ` using ${o.apiVersion}`;
  return s;
}

/**
 * Server-side apply of `applied` onto `live` (undefined when the object does not exist yet).
 * Throws a 409 listing the managers and fields in conflict unless `force`.
 */
export function serverSideApply(
  type: ResourceType,
  live: KObject | undefined,
  applied: KObject,
  who: Actor,
  force: boolean,
): ApplyResult {
  const scope = scopeOf(type, who.subresource);
  const owners = live ? readOwners(live) : [];
  const appliedSet = appliedFieldSet(applied, schemaOf(type), scope);
  const me = { ...who, operation: "Apply" as const };
  const previous = owners.find((o) => sameEntry(o, me))?.fields ?? new Set<PathKey>();

  // Conflicts: a field another entry owns, whose live value differs from the applied one.
  const conflicts: { owner: Owner; field: PathKey }[] = [];
  if (live) {
    for (const field of appliedSet) {
      const now = getAt(live, field);
      const want = getAt(applied, field);
      if (!now.found || deepEqual(now.value, want.value)) continue;
      if (pathOf(field).pop()?.startsWith("k:")) continue; // items are compared field by field
      for (const o of owners) {
        if (!sameEntry(o, me) && o.fields.has(field)) conflicts.push({ owner: o, field });
      }
    }
  }
  if (conflicts.length > 0 && !force) {
    const name = live?.metadata.name ?? "";
    const byOwner = conflicts.map((c) => `${conflictText(c.owner)}: ${describePath(c.field)}`);
    const message =
      conflicts.length === 1
        ? `Apply failed with 1 conflict: ${byOwner[0]}`
        : `Apply failed with ${conflicts.length} conflicts: ${byOwner.join("\n")}`;
    throw new ApiError(409, "Conflict", message, {
      name,
      group: type.group,
      kind: type.plural,
      causes: conflicts.map((c) => ({
        reason: "FieldManagerConflict",
        message: conflictText(c.owner),
        field: describePath(c.field),
      })),
    });
  }
  for (const c of conflicts) c.owner.fields.delete(c.field);

  // Fields this manager applied last time and not now go away unless somebody else owns them.
  let base: KObject = clone(live ?? applied);
  for (const field of previous) {
    if (appliedSet.has(field)) continue;
    const ownedElsewhere = owners.some(
      (o) => !sameEntry(o, me) && [...o.fields].some((f) => isUnder(f, field) || isUnder(field, f)),
    );
    if (!ownedElsewhere) removeAt(base, field);
  }
  if (!live) base = { apiVersion: applied.apiVersion, kind: applied.kind, metadata: { ...applied.metadata } };
  const merged = mergeApplied(base, applied, schemaOf(type)) as KObject;

  const mine = upsert(owners, me);
  mine.fields = new Set(appliedSet);
  return { object: merged, owners: owners.filter((o) => o.fields.size > 0) };
}

/** How an entry is told apart on the Scale: Update entries there are all of autoscaling/v1. */
const scaleIdentity = (o: Pick<Owner, "manager" | "operation" | "subresource">) =>
  `${o.manager}\u0000${o.operation}\u0000${o.subresource ?? ""}`;

/**
 * Ownership after a write through the scale subresource, as k8s.io/apimachinery's ScaleHandler
 * carries managedFields to the Scale and back:
 * - The Scale shows the parent's entries that own the replicas, as autoscaling/v1 entries owning
 *   its `spec.replicas`. When none does, the Scale has no managedFields and its update is not
 *   tracked: the writer gets no entry.
 * - The write is an Update of the Scale under subresource `scale`: the writer takes the replicas
 *   when it changed them, from every entry there.
 * - Back on the parent, an Apply entry (identity without apiVersion) the Scale still has owning the
 *   replicas is kept whole, with its time. Every other parent entry loses the replicas: an Update
 *   entry's identity carries its apiVersion, and none of the parent's is autoscaling/v1. Each
 *   Update entry of the Scale still owning the replicas (the writer's, and those of a write that
 *   left the replicas as they were) returns as an entry of the parent's apiVersion with the time
 *   the parent has under the Scale's identity: none, so it has no `time`. Such an entry can share
 *   its identity with the parent entry it came from; the next write keeps one of the two.
 */
export function ownersAfterScale(type: ResourceType, before: KObject, after: KObject, who: Actor): Owner[] {
  const owners = readOwners(before);
  const replicasPath = type.scale?.specReplicasPath ?? ".spec.replicas";
  const replicas = pathKey(
    replicasPath
      .replace(/^\./, "")
      .split(".")
      .map((k) => `f:${k}`),
  );
  const holders = owners.filter((o) => o.fields.has(replicas));
  if (holders.length === 0) return owners;

  // The Scale's entries: identity -> whether it owns the replicas after the write.
  const onScale = new Map<
    string,
    { owner: Pick<Owner, "manager" | "operation" | "subresource">; holds: boolean }
  >();
  for (const o of holders) onScale.set(scaleIdentity(o), { owner: o, holds: true });
  const changed = !deepEqual(getAt(before, replicas), getAt(after, replicas));
  if (changed) {
    for (const e of onScale.values()) e.holds = false;
    const writer = { manager: who.manager, operation: "Update" as const, subresource: "scale" };
    onScale.set(scaleIdentity(writer), { owner: writer, holds: true });
  }

  const out: Owner[] = [];
  const keptWhole = new Set<string>();
  for (const o of owners) {
    if (!o.fields.has(replicas)) {
      out.push(o);
      continue;
    }
    const id = scaleIdentity(o);
    if (o.operation === "Apply" && onScale.get(id)?.holds) {
      out.push(o);
      keptWhole.add(id);
      continue;
    }
    const rest = new Set([...o.fields].filter((f) => f !== replicas));
    if (rest.size > 0) out.push({ ...o, fields: rest });
  }
  for (const [id, e] of onScale) {
    if (!e.holds || keptWhole.has(id)) continue;
    out.push({
      manager: e.owner.manager,
      operation: e.owner.operation,
      apiVersion: who.apiVersion,
      ...(e.owner.subresource ? { subresource: e.owner.subresource } : {}),
      fields: new Set([replicas]),
    });
  }
  return out;
}
