/**
 * Resolves the kinds WatchRules name against the API server's discovery. A kind the server does
 * not serve (a CRD not installed yet) is unresolved, reported on the rule and asked again later.
 */
import type * as k8s from "@kubernetes/client-node";
import type { WatchedKind } from "../../queue/crds/index.js";
import type { Kube } from "../../queue/kube/index.js";
import { apiVersionOf, type ResolvedKind } from "./rules.js";

type Discovering = {
  resource(apiVersion: string, kind: string): Promise<k8s.V1APIResource | undefined>;
  apiVersionResourceCache?: Record<string, k8s.V1APIResourceList>;
};

/** The served kind a WatchRule names, or undefined when the server does not serve it (yet). */
export async function resolveKind(kube: Kube, k: WatchedKind): Promise<ResolvedKind | undefined> {
  const objects = kube.objects as unknown as Discovering;
  const apiVersion = apiVersionOf(k);
  let found: k8s.V1APIResource | undefined;
  try {
    const kind = k.kind;
    if (kind !== undefined) found = await kube.request(() => objects.resource(apiVersion, kind));
    else {
      // The client's discovery finds by kind only; asking for no kind fills its cache of the
      // group version's resources, which are then searched by name.
      await kube.request(() => objects.resource(apiVersion, "\u0000"));
      found = objects.apiVersionResourceCache?.[apiVersion]?.resources.find((r) => r.name === k.resource);
    }
  } catch {
    return undefined; // the group version is not served (404): a CRD not installed yet
  }
  if (!found || found.name.includes("/")) return undefined;
  return {
    group: k.group,
    version: k.version,
    kind: found.kind,
    resource: found.name,
    namespaced: found.namespaced,
  };
}
