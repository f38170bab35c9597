/** The few API calls both controllers make, through the real client. */
import * as k8s from "@kubernetes/client-node";
import type { Obj } from "./watcher.js";

export interface Kind {
  group: string;
  version: string;
  plural: string;
}

export const FINALIZER = "finalizers.fluxcd.io";
const MERGE = k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch);

export class Kube {
  readonly custom: k8s.CustomObjectsApi;
  readonly objects: k8s.KubernetesObjectApi;

  constructor(kc: k8s.KubeConfig) {
    this.custom = kc.makeApiClient(k8s.CustomObjectsApi);
    this.objects = k8s.KubernetesObjectApi.makeApiClient(kc);
  }

  /** A read that bypasses the cache (controller-runtime's APIReader). */
  async get(kind: Kind, namespace: string, name: string): Promise<Obj | undefined> {
    try {
      return (await this.custom.getNamespacedCustomObject({ ...kind, namespace, name })) as Obj;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /** A merge patch of status through the status subresource; returns the object written. */
  async patchStatus(kind: Kind, obj: Obj, status: unknown, fieldManager: string): Promise<Obj> {
    return (await this.custom.patchNamespacedCustomObjectStatus(
      {
        ...kind,
        namespace: obj.metadata?.namespace as string,
        name: obj.metadata?.name as string,
        body: { status },
        fieldManager,
      },
      MERGE,
    )) as Obj;
  }

  /** Writes metadata.finalizers, guarded by the resourceVersion read (a conflict retries the reconcile). */
  async setFinalizers(kind: Kind, obj: Obj, finalizers: string[], fieldManager: string): Promise<Obj> {
    return (await this.custom.patchNamespacedCustomObject(
      {
        ...kind,
        namespace: obj.metadata?.namespace as string,
        name: obj.metadata?.name as string,
        body: { metadata: { finalizers, resourceVersion: obj.metadata?.resourceVersion } },
        fieldManager,
      },
      MERGE,
    )) as Obj;
  }
}

export function isNotFound(err: unknown): boolean {
  return (err as { code?: number })?.code === 404;
}
