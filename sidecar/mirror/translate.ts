/**
 * What one watched write becomes for one WatchRule (pure): nothing (the rule does not select the
 * object, or nothing Git holds changed), an exclusion (another applier's object, or one the
 * sanitizer leaves out), a refusal (what the worker could not store, a Secret), or the write to
 * hand to the GitTarget's branch, with its author. The Mirror counts, logs and delivers.
 */
import type { AcceptedWrite, ObjectRef, SnapshotStamp, WriteChange } from "../../queue/contract.js";
import type { WatchRule } from "../../queue/crds/index.js";
import type { InformerEvent, KObject } from "../../queue/kube/index.js";
import { writeProblem } from "../../queue/write-check.js";
import { authorshipOf } from "./authorship.js";
import { describeOwner, excludingOwner } from "./ownership.js";
import { apiVersionOf, type ResolvedKind, selects } from "./rules.js";
import { type SanitizeOptions, sanitize } from "./sanitize.js";
import type { ResolvedTarget } from "./targets.js";

/** The fields of a write a translation decides; the Mirror adds its id, target and time. */
export type WriteBody = Pick<
  AcceptedWrite,
  "changes" | "author" | "editedAt" | "applierAuthored" | "sweep" | "snapshot" | "initialSnapshots"
>;

export type Translation =
  /** The rule does not select the object: another rule of the same GitTarget may. */
  | { verdict: "NotSelected" }
  /** Selected, and nothing to write (a status write, server bookkeeping, a delete never mirrored). */
  | { verdict: "Unchanged" }
  /** Selected and left out of the folder: `owner` names another applier that owns it. */
  | { verdict: "Excluded"; shown: string; owner?: string }
  | { verdict: "Refused"; message: string }
  | { verdict: "Write"; write: WriteBody };

export interface TranslateInput {
  rule: WatchRule;
  target: ResolvedTarget;
  kind: ResolvedKind;
  type: InformerEvent;
  obj: KObject;
  previous?: KObject;
  /** Set when the write belongs to a snapshot round. */
  stamp?: SnapshotStamp;
  controllerManagers: readonly string[];
  /** Authors are `<manager> <manager@domain>`. */
  authorDomain: string;
}

export const refOf = (kind: ResolvedKind, o: KObject): ObjectRef => ({
  apiVersion: apiVersionOf(kind),
  kind: kind.kind,
  name: o.metadata.name,
  ...(kind.namespaced && o.metadata.namespace ? { namespace: o.metadata.namespace } : {}),
});

/** A stable encoding (keys sorted), so two sanitized versions compare by content. */
export function stable(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stable).join(",")}]`;
  if (v && typeof v === "object")
    return `{${Object.keys(v as object)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stable((v as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  return JSON.stringify(v);
}

export function translate(i: TranslateInput): Translation {
  const { rule, target, kind, obj, previous } = i;
  // An update that takes the object out of the selector is not a delete: Git keeps its file.
  // What the GitTarget may not hold is never looked at (the rule's status says so: outOfScope).
  if (!selects(rule, target.scope, kind, obj).selected) return { verdict: "NotSelected" };
  const ref = refOf(kind, obj);
  const shown = `${kind.kind} ${ref.namespace ? `${ref.namespace}/` : ""}${ref.name}`;
  const owner = excludingOwner(obj, target.applier);
  if (owner) return { verdict: "Excluded", shown, owner: describeOwner(owner) };
  const opts: SanitizeOptions = {
    controllerManagers: i.controllerManagers,
    ...(rule.spec.excludeFields ? { excludeFields: rule.spec.excludeFields } : {}),
  };
  const author = (manager: string) => ({ name: manager, email: `${manager}@${i.authorDomain}` });
  const clean = sanitize(obj as Record<string, unknown>, opts);
  if (i.type === "delete")
    // Never mirrored, so there is no file to delete.
    return clean.ok
      ? { verdict: "Write", write: { changes: [{ op: "delete", ref }], author: author("unknown") } }
      : { verdict: "Unchanged" };
  if (!clean.ok)
    // A Secret never gets here (its kind is never watched); refused all the same if one did.
    return clean.reason === "secret"
      ? { verdict: "Refused", message: `${shown}: ${clean.message}` }
      : { verdict: "Excluded", shown };
  let base: Record<string, unknown> | undefined;
  if (previous) {
    const was = sanitize(previous as Record<string, unknown>, opts);
    // Nothing Git holds changed (a status write, server bookkeeping): no write.
    if (was.ok && stable(was.object) === stable(clean.object)) return { verdict: "Unchanged" };
    if (was.ok) base = was.object;
  }
  // The write names its change: the object as this watch last saw it is its base, so a field
  // this write did not change (one a withheld late apply set, say) keeps Git's value.
  const change: WriteChange = {
    op: "upsert",
    object: clean.object as WriteChange & never,
    ...(base ? { base: base as WriteChange & never } : {}),
  };
  // What the worker could not store is refused here, counted on the rule, never queued.
  const problem = writeProblem([change]);
  if (problem) return { verdict: "Refused", message: `${shown}: ${problem.field}: ${problem.message}` };
  const snap = i.stamp ? { snapshot: i.stamp } : {};
  const who = authorshipOf(obj, target.applierManagers, previous);
  return {
    verdict: "Write",
    write:
      who.kind === "applier"
        ? {
            changes: [change],
            author: author(who.write.manager),
            applierAuthored: who.write,
            editedAt: who.write.writtenAt,
            ...snap,
          }
        : {
            changes: [change],
            author: author(who.manager),
            ...(who.editedAt ? { editedAt: who.editedAt } : {}),
            ...snap,
          },
  };
}
