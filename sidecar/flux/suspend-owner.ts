/**
 * Who owns spec.suspend (pure), from managedFields. Another manager that *applies* the field
 * would take it back on its next apply, so the claim holds nothing then (SuspendOwnedElsewhere).
 * An Update entry (flux resume, flux suspend, kubectl edit) wrote it once; our next forced
 * apply takes it back, so it is no refusal.
 */
import { FIELD_MANAGER } from "../../queue/contract.js";
import { StatusReason } from "../../queue/crds/reasons.js";
import type { Kustomization, ManagedFieldsEntry } from "./resources.js";

export const entriesOf = (ks: Kustomization | undefined): ManagedFieldsEntry[] =>
  (ks?.metadata.managedFields ?? []) as ManagedFieldsEntry[];

/** Whether the entry's field set holds spec.suspend. */
export function ownsSuspendField(entry: ManagedFieldsEntry): boolean {
  const spec = entry.fieldsV1?.["f:spec"];
  return typeof spec === "object" && spec !== null && "f:suspend" in spec;
}

/** Managers other than `self` that apply spec.suspend (main resource only). */
export function suspendAppliers(ks: Kustomization | undefined, self: string = FIELD_MANAGER): string[] {
  return entriesOf(ks)
    .filter(
      (e) =>
        e.operation === "Apply" && !e.subresource && e.manager && e.manager !== self && ownsSuspendField(e),
    )
    .map((e) => e.manager as string);
}

/** Whether `manager` holds spec.suspend by server-side apply. */
export function appliesSuspend(ks: Kustomization | undefined, manager: string = FIELD_MANAGER): boolean {
  return entriesOf(ks).some(
    (e) => e.operation === "Apply" && !e.subresource && e.manager === manager && ownsSuspendField(e),
  );
}

export type SuspendOwnership =
  | { ok: true }
  | { ok: false; reason: typeof StatusReason.SuspendOwnedElsewhere; managers: string[]; message: string };

export function checkSuspendOwnership(
  ks: Kustomization | undefined,
  self: string = FIELD_MANAGER,
): SuspendOwnership {
  const managers = suspendAppliers(ks, self);
  if (managers.length === 0) return { ok: true };
  return {
    ok: false,
    reason: StatusReason.SuspendOwnedElsewhere,
    managers,
    message: `spec.suspend of Kustomization ${ks?.metadata.namespace}/${ks?.metadata.name} is applied by ${managers.join(", ")}; remove the field from what that manager applies`,
  };
}
