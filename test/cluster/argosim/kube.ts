/**
 * The controller's Kubernetes client: the real @kubernetes/client-node, every request carrying the
 * controller's user agent, so an update with no field manager is recorded under its first word
 * (argocd-application-controller), as the API server does for the real binary.
 */
import {
  createConfiguration,
  type KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
  PatchStrategy,
  ServerConfiguration,
} from "@kubernetes/client-node";
import type { KObj } from "./types.js";

export const CONTROLLER_USER_AGENT = "argocd-application-controller/v3.5.0 (linux/amd64)";
export const APPSET_USER_AGENT = "argocd-applicationset-controller/v3.5.0 (linux/amd64)";

/** The generic object client, with discovery's namespaced flag made reachable. */
export class ObjectClient extends KubernetesObjectApi {
  async namespaced(apiVersion: string, kind: string): Promise<boolean> {
    const r = await this.resource(apiVersion, kind);
    if (!r) throw new Error(`the server could not find the requested resource ${apiVersion} ${kind}`);
    return r.namespaced;
  }

  /** The collection path of a kind across namespaces, as a watch asks for it. */
  async collectionPath(apiVersion: string, kind: string): Promise<string> {
    const r = await this.resource(apiVersion, kind);
    if (!r) throw new Error(`the server could not find the requested resource ${apiVersion} ${kind}`);
    return `${apiVersion.includes("/") ? "/apis" : "/api"}/${apiVersion}/${r.name}`;
  }
}

export function objectClient(kc: KubeConfig, userAgent: string): ObjectClient {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error("kubeconfig has no current cluster");
  const config = createConfiguration({
    baseServer: new ServerConfiguration(cluster.server, {}),
    authMethods: { default: kc },
    promiseMiddleware: [
      {
        pre: async (ctx) => {
          ctx.setHeaderParam("User-Agent", userAgent);
          return ctx;
        },
        post: async (res) => res,
      },
    ],
  });
  return new ObjectClient(config);
}

export const isNotFound = (e: unknown): boolean => (e as { code?: number }).code === 404;
export const isConflict = (e: unknown): boolean => (e as { code?: number }).code === 409;

/** The message of an API error: the Status body's message when there is one. */
export function errorMessage(e: unknown): string {
  const body = (e as { body?: unknown }).body;
  if (typeof body === "string") {
    try {
      const parsed = JSON.parse(body) as { message?: string };
      if (parsed.message) return parsed.message;
    } catch {}
    return body;
  }
  if (body && typeof body === "object" && "message" in body)
    return String((body as { message: unknown }).message);
  return e instanceof Error ? e.message : String(e);
}

export async function readOrUndefined<T = KubernetesObject>(
  api: KubernetesObjectApi,
  ref: { apiVersion: string; kind: string; metadata: { name: string; namespace?: string } },
): Promise<T | undefined> {
  try {
    return (await api.read(ref as never)) as unknown as T;
  } catch (e) {
    if (isNotFound(e)) return undefined;
    throw e;
  }
}

export const MERGE = PatchStrategy.MergePatch;
export const APPLY = PatchStrategy.ServerSideApply;

export type { KObj };
