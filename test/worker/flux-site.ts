/**
 * The Flux site the decision worlds build on the simulated API server (decisions-world.ts and
 * test/mirror/snapshots.test.ts), in the harness's namespace: Kustomization `apps` applying the
 * harness's folder, FluxClaim `claim` holding it, GitProvider `gp` for the repository and
 * GitTarget `site` writing the folder under the claim.
 */
import * as k8s from "@kubernetes/client-node";
import { FOLDER, TARGET } from "./harness.js";

const NS = TARGET.namespace;
const APPLYGATE = "applygate.dev/v1alpha1";

/** Kustomization `name` applying `path` from GitRepository `source`, its interval never due in a test. */
export const kustomization = (namespace: string, name: string, path: string, source: string) => ({
  apiVersion: "kustomize.toolkit.fluxcd.io/v1",
  kind: "Kustomization",
  metadata: { name, namespace },
  spec: {
    interval: "100h",
    prune: true,
    path: `./${path}`,
    sourceRef: { kind: "GitRepository", name: source },
  },
});

/** FluxClaim `name` holding Kustomization `held` of its namespace; `spec` adds to its spec. */
export const fluxClaimHolding = (
  namespace: string,
  name: string,
  held: string,
  spec: Record<string, unknown> = {},
) => ({
  apiVersion: APPLYGATE,
  kind: "FluxClaim",
  metadata: { name, namespace },
  spec: { kustomizationRef: { name: held, namespace }, ...spec },
});

export function fluxSite(
  url: string,
  o: {
    claimSpec?: Record<string, unknown> | undefined;
    providerSpec?: Record<string, unknown> | undefined;
    windowSeconds?: number | undefined;
  } = {},
) {
  return {
    kustomization: kustomization(NS, "apps", FOLDER, "repo"),
    claim: fluxClaimHolding(NS, "claim", "apps", o.claimSpec),
    provider: {
      apiVersion: APPLYGATE,
      kind: "GitProvider",
      metadata: { name: "gp", namespace: NS },
      spec: { url, type: "gitea", webhookSecretRef: { name: "hook" }, ...o.providerSpec },
    },
    target: {
      apiVersion: APPLYGATE,
      kind: "GitTarget",
      metadata: { name: TARGET.name, namespace: NS },
      spec: {
        providerRef: { name: "gp" },
        branch: "main",
        path: FOLDER,
        claimRef: { kind: "FluxClaim", name: "claim" },
        commitWindow: { idleSeconds: o.windowSeconds ?? 1, maxSeconds: 30 },
      },
    },
  };
}

/** Sets the claim's status.lastAppliedCommit to `commit`: the site starts applied at it. */
export async function claimAppliedAt(custom: k8s.CustomObjectsApi, commit: string): Promise<void> {
  await custom.patchNamespacedCustomObjectStatus(
    {
      group: "applygate.dev",
      version: "v1alpha1",
      plural: "fluxclaims",
      namespace: NS,
      name: "claim",
      body: { status: { lastAppliedCommit: commit } },
    },
    k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
  );
}
