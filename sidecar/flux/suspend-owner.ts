/**
 * Who owns spec.suspend (pure), from managedFields. Another manager that *applies* the field
 * would take it back on its next apply, so the claim holds nothing then (SuspendOwnedElsewhere).
 * An Update entry (flux resume, flux suspend, kubectl edit) wrote it once; our next forced
 * apply takes it back, so it is no refusal.
 */
import { FIELD_MANAGER } from "../../queue/contract.js";
import { StatusReason } from "../../queue/crds/reasons.js";
import { fieldAppliers, type KObject } from "../../queue/kube/index.js";

const SUSPEND = ["spec", "suspend"];

/** Managers other than `self` that apply spec.suspend (main resource only). */
export function suspendAppliers(ks: KObject | undefined, self: string = FIELD_MANAGER): string[] {
  return fieldAppliers(ks, SUSPEND).filter((m): m is string => m !== undefined && m !== self);
}

/** Whether `manager` holds spec.suspend by server-side apply. */
export function appliesSuspend(ks: KObject | undefined, manager: string = FIELD_MANAGER): boolean {
  return fieldAppliers(ks, SUSPEND).includes(manager);
}

export type SuspendOwnership =
  | { ok: true }
  | { ok: false; reason: typeof StatusReason.SuspendOwnedElsewhere; managers: string[]; message: string };

export function checkSuspendOwnership(
  ks: KObject | undefined,
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
