/**
 * Another applier's objects (pure). The owner is read from the raw object, before sanitize strips
 * it: Flux's owner labels (a Kustomization), else Argo CD's tracking annotation. An object another
 * applier owns is excluded from a folder its own applier applies, since two appliers applying one
 * object fight each other; a folder with no applier excludes nothing.
 */
import type { ApplierRef } from "../../queue/contract.js";

export const FLUX_NAME_LABEL = "kustomize.toolkit.fluxcd.io/name";
export const FLUX_NAMESPACE_LABEL = "kustomize.toolkit.fluxcd.io/namespace";
export const ARGOCD_TRACKING_ANNOTATION = "argocd.argoproj.io/tracking-id";

export type Owner =
  | { kind: "flux"; namespace: string; name: string }
  /** `app` as the tracking id writes it: `<namespace>_<name>` outside Argo CD's namespace, else `<name>`. */
  | { kind: "argocd"; app: string };

type Meta = { metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> } };

export function ownerOf(obj: Meta): Owner | null {
  const labels = obj.metadata?.labels ?? {};
  const name = labels[FLUX_NAME_LABEL];
  const namespace = labels[FLUX_NAMESPACE_LABEL];
  if (name && namespace) return { kind: "flux", namespace, name };
  const tracking = obj.metadata?.annotations?.[ARGOCD_TRACKING_ANNOTATION];
  if (tracking) {
    const app = tracking.split(":")[0];
    if (app) return { kind: "argocd", app };
  }
  return null;
}

/** Whether the owner is the applier itself. */
export function ownedBy(owner: Owner, applier: ApplierRef): boolean {
  if (owner.kind === "flux")
    return applier.kind === "flux" && owner.namespace === applier.namespace && owner.name === applier.name;
  return (
    applier.kind === "argocd" &&
    (owner.app === applier.name || owner.app === `${applier.namespace}_${applier.name}`)
  );
}

/** The owner that excludes the object from a folder `applier` applies, or null when it is mirrored. */
export function excludingOwner(obj: Meta, applier: ApplierRef | null): Owner | null {
  if (!applier) return null;
  const owner = ownerOf(obj);
  return owner && !ownedBy(owner, applier) ? owner : null;
}

export function describeOwner(o: Owner): string {
  return o.kind === "flux" ? `Kustomization ${o.namespace}/${o.name}` : `Argo CD Application ${o.app}`;
}
