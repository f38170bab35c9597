/**
 * The catalog's objects read from the Kubernetes API. Claim status is merge-patched through the
 * status subresource with a resourceVersion precondition: a lost race re-reads and retries, so a
 * conflict with the sidecar's own status writes never wedges the claim.
 */
import * as k8s from "@kubernetes/client-node";
import type { ClaimRef } from "../contract.js";
import type { Logger } from "../log.js";
import { type KubeLike, type ObjectSource, RESOURCE, type ResourceKind } from "./catalog.js";

const MERGE = k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch);

function statusCode(err: unknown): number | undefined {
  const e = err as { code?: number; statusCode?: number };
  return e.code ?? e.statusCode;
}

export class KubeObjects implements ObjectSource {
  private readonly custom: k8s.CustomObjectsApi;

  constructor(
    kc: k8s.KubeConfig,
    private readonly log: Logger,
    private readonly maxAttempts = 8,
  ) {
    this.custom = kc.makeApiClient(k8s.CustomObjectsApi);
  }

  async get(kind: ResourceKind, namespace: string, name: string): Promise<KubeLike | undefined> {
    try {
      return (await this.custom.getNamespacedCustomObject({
        ...RESOURCE[kind],
        namespace,
        name,
      })) as KubeLike;
    } catch (err) {
      // A missing object, or a kind this cluster does not serve (no Argo CD installed).
      if (statusCode(err) === 404) return undefined;
      throw err;
    }
  }

  async list(kind: ResourceKind, namespace: string): Promise<KubeLike[]> {
    try {
      const out = (await this.custom.listNamespacedCustomObject({ ...RESOURCE[kind], namespace })) as {
        items?: KubeLike[];
      };
      return out.items ?? [];
    } catch (err) {
      if (statusCode(err) === 404) return [];
      throw err;
    }
  }

  async patchClaimStatus(
    claim: ClaimRef,
    patch: (current: KubeLike) => Record<string, unknown> | undefined,
  ): Promise<boolean> {
    const ref = {
      ...RESOURCE[claim.kind as "FluxClaim" | "ArgoCDClaim"],
      namespace: claim.namespace,
      name: claim.name,
    };
    for (let attempt = 1; ; attempt++) {
      const current = await this.get(claim.kind as ResourceKind, claim.namespace, claim.name);
      if (!current) return false;
      const status = patch(current);
      if (!status) return true;
      const body = { metadata: { resourceVersion: current.metadata.resourceVersion }, status };
      try {
        await this.custom.patchNamespacedCustomObjectStatus({ ...ref, body }, MERGE);
        return true;
      } catch (err) {
        const code = statusCode(err);
        if (code === 404) return false;
        if (code !== 409 || attempt >= this.maxAttempts) throw err;
        this.log.debug(
          { claim: `${claim.namespace}/${claim.name}`, attempt },
          "claim status conflicted; re-reading",
        );
        await new Promise((r) => setTimeout(r, Math.round(10 * 2 ** attempt * (0.5 + Math.random()))));
      }
    }
  }
}
