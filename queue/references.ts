/**
 * What our objects reference (pure): the claim a GitTarget names, and the applier a claim holds.
 * The worker's listing and the sidecar's mirror read references alike.
 */
import type { ApplierRef, ClaimRef } from "./contract.js";

/** An object as a reference is read from it, however it was read (a KObject, a catalog entry). */
export interface Referencing {
  metadata: { name: string; namespace?: string | undefined };
  spec?: unknown;
}

const str = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);
const obj = (v: unknown): Record<string, unknown> | undefined =>
  v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;

/** The claim a GitTarget names (its namespace defaults to the GitTarget's). */
export function claimOf(t: Referencing): ClaimRef | null {
  const ref = obj(obj(t.spec)?.claimRef);
  const kind = str(ref?.kind);
  const name = str(ref?.name);
  if (!ref || !name || (kind !== "FluxClaim" && kind !== "ArgoCDClaim" && kind !== "WebhookClaim"))
    return null;
  return { kind, namespace: str(ref.namespace) ?? t.metadata.namespace ?? "default", name };
}

/**
 * The applier a claim holds, from its immutable reference. A WebhookClaim's applier is its
 * endpoint, which lives on the claim itself: the applier is named by the claim.
 */
export function applierOf(claim: ClaimRef, c: Referencing): ApplierRef | null {
  if (claim.kind === "WebhookClaim") {
    const managers = obj(c.spec)?.fieldManagers;
    const fieldManagers = Array.isArray(managers) ? managers.filter((m) => typeof m === "string") : [];
    return {
      kind: "webhook",
      namespace: c.metadata.namespace ?? claim.namespace,
      name: c.metadata.name,
      ...(fieldManagers.length > 0 ? { fieldManagers } : {}),
    };
  }
  const ref = obj(claim.kind === "FluxClaim" ? obj(c.spec)?.kustomizationRef : obj(c.spec)?.applicationRef);
  const name = str(ref?.name);
  if (!name) return null;
  const namespace = str(ref?.namespace) ?? c.metadata.namespace ?? claim.namespace;
  return { kind: claim.kind === "FluxClaim" ? "flux" : "argocd", namespace, name };
}
