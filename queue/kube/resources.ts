/** The resources the layer addresses: our kinds' table, and the raw object shape the API returns. */
import type * as k8s from "@kubernetes/client-node";
import {
  APPLIER_GRANT_PLURAL,
  ARGOCD_CLAIM_PLURAL,
  FLUX_CLAIM_PLURAL,
  GIT_PROVIDER_PLURAL,
  GIT_TARGET_PLURAL,
  GROUP,
  VERSION,
  WATCH_RULE_PLURAL,
  WEBHOOK_CLAIM_PLURAL,
} from "../crds/index.js";

/** A resource served under /apis/<group>/<version>/…/<plural> (custom resources and grouped built-ins). */
export interface ResourceType {
  group: string;
  version: string;
  plural: string;
  kind: string;
}

export const RESOURCES = {
  gitProvider: { group: GROUP, version: VERSION, plural: GIT_PROVIDER_PLURAL, kind: "GitProvider" },
  gitTarget: { group: GROUP, version: VERSION, plural: GIT_TARGET_PLURAL, kind: "GitTarget" },
  fluxClaim: { group: GROUP, version: VERSION, plural: FLUX_CLAIM_PLURAL, kind: "FluxClaim" },
  argoCDClaim: { group: GROUP, version: VERSION, plural: ARGOCD_CLAIM_PLURAL, kind: "ArgoCDClaim" },
  webhookClaim: { group: GROUP, version: VERSION, plural: WEBHOOK_CLAIM_PLURAL, kind: "WebhookClaim" },
  applierGrant: { group: GROUP, version: VERSION, plural: APPLIER_GRANT_PLURAL, kind: "ApplierGrant" },
  watchRule: { group: GROUP, version: VERSION, plural: WATCH_RULE_PLURAL, kind: "WatchRule" },
} as const satisfies Record<string, ResourceType>;

export type ClaimType =
  | typeof RESOURCES.fluxClaim
  | typeof RESOURCES.argoCDClaim
  | typeof RESOURCES.webhookClaim;

/** The resource of a claim kind. */
export function claimTypeOf(kind: "FluxClaim" | "ArgoCDClaim" | "WebhookClaim"): ClaimType {
  return kind === "FluxClaim"
    ? RESOURCES.fluxClaim
    : kind === "ArgoCDClaim"
      ? RESOURCES.argoCDClaim
      : RESOURCES.webhookClaim;
}

/** An object as the API server returns it, before a reader parses it. */
export interface KObject {
  apiVersion?: string;
  kind?: string;
  metadata: k8s.V1ObjectMeta & { name: string };
  spec?: unknown;
  status?: unknown;
  [key: string]: unknown;
}

/** The collection path of a resource, cluster-wide or in one namespace. */
export function collectionPath(t: ResourceType, namespace?: string): string {
  const base = t.group ? `/apis/${t.group}/${t.version}` : `/api/${t.version}`;
  return namespace ? `${base}/namespaces/${namespace}/${t.plural}` : `${base}/${t.plural}`;
}

/** `namespace/name`, the key of a namespaced object in caches and work queues. */
export const objectKey = (o: { metadata: { namespace?: string; name?: string } }) =>
  `${o.metadata.namespace ?? ""}/${o.metadata.name ?? ""}`;
