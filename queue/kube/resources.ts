/**
 * The one table of the resources the processes address (our kinds, and the appliers' kinds they
 * read and write), and the raw object shape the API returns.
 */
import type * as k8s from "@kubernetes/client-node";
import {
  APPLIER_GRANT_PLURAL,
  APPROVAL_PLURAL,
  ARGOCD_CLAIM_PLURAL,
  FLUX_CLAIM_PLURAL,
  GIT_PROVIDER_PLURAL,
  GIT_TARGET_PLURAL,
  GROUP,
  SCOPE_GRANT_PLURAL,
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
  scopeGrant: { group: GROUP, version: VERSION, plural: SCOPE_GRANT_PLURAL, kind: "ScopeGrant" },
  kustomization: {
    group: "kustomize.toolkit.fluxcd.io",
    version: "v1",
    plural: "kustomizations",
    kind: "Kustomization",
  },
  gitRepository: {
    group: "source.toolkit.fluxcd.io",
    version: "v1",
    plural: "gitrepositories",
    kind: "GitRepository",
  },
  application: { group: "argoproj.io", version: "v1alpha1", plural: "applications", kind: "Application" },
  appProject: { group: "argoproj.io", version: "v1alpha1", plural: "appprojects", kind: "AppProject" },
  applicationSet: {
    group: "argoproj.io",
    version: "v1alpha1",
    plural: "applicationsets",
    kind: "ApplicationSet",
  },
  event: { group: "events.k8s.io", version: "v1", plural: "events", kind: "Event" },
  watchRule: { group: GROUP, version: VERSION, plural: WATCH_RULE_PLURAL, kind: "WatchRule" },
  approval: { group: GROUP, version: VERSION, plural: APPROVAL_PLURAL, kind: "Approval" },
} as const satisfies Record<string, ResourceType>;

type Resources = typeof RESOURCES;
/** A kind the table holds, by its `kind`. */
export type ResourceKind = Resources[keyof Resources]["kind"];

/** Where a resource is served, as the client's custom-object calls take it. */
export function addressOf(t: ResourceType): { group: string; version: string; plural: string } {
  return { group: t.group, version: t.version, plural: t.plural };
}

/** The table's entry for `kind`. */
export function resourceOf<K extends ResourceKind>(
  kind: K,
): Extract<Resources[keyof Resources], { kind: K }> {
  const found = Object.values(RESOURCES).find((r) => r.kind === kind);
  if (!found) throw new Error(`no resource ${kind}`);
  return found as Extract<Resources[keyof Resources], { kind: K }>;
}

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
