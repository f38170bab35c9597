/**
 * Who each component is, as deployed: the ServiceAccount its Deployment, StatefulSet or patch names,
 * and the Roles, ClusterRoles and bindings applygate's manifests grant (and the admission policies
 * they ship), read from the YAML the kustomize overlays build (never restated here). The assembly stores these objects in the
 * simulated cluster and starts each component with its ServiceAccount's token, so a component
 * that needs a permission the manifests do not grant is refused (403) as it would be on a cluster.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { build, type K8sObject, KUBECTL_AVAILABLE, OVERLAYS } from "../manifests/kustomize.js";

export type Component = "gateway" | "worker" | "mirror" | "flux" | "argocd" | "webhook";

export interface ServiceAccountRef {
  namespace: string;
  name: string;
}

export interface Deployed {
  /** Every Role, ClusterRole, RoleBinding and ClusterRoleBinding the overlays build. */
  rbac: K8sObject[];
  /** The ServiceAccount each component runs as. */
  serviceAccounts: Record<Component, ServiceAccountRef>;
  /** The ValidatingAdmissionPolicies and bindings the base ships (who approved is the requester). */
  admission: K8sObject[];
}

const RBAC_KINDS = new Set(["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"]);
const ADMISSION_KINDS = new Set(["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]);
const SIDECAR = "applygate-sidecar";

type Workload = K8sObject & {
  spec: { template: { spec: { serviceAccountName?: string; containers: { name: string }[] } } };
};

function serviceAccountOf(objects: K8sObject[], pick: (w: Workload) => boolean, what: string) {
  const found = objects
    .filter((o): o is Workload => o.kind === "Deployment" || o.kind === "StatefulSet")
    .filter(pick);
  if (found.length !== 1) throw new Error(`expected one workload for ${what}, found ${found.length}`);
  const w = found[0]!;
  return {
    namespace: w.metadata.namespace ?? "default",
    name: w.spec.template.spec.serviceAccountName ?? "default",
  };
}

let cached: Deployed | undefined;

/**
 * The same reading, kept in the repository for machines without kubectl (a fresh machine with
 * Node and npm runs `npm start`): written by `npm run gen:deployed`, and kept equal to a fresh
 * build by test/playground/identities.test.ts wherever kubectl is on PATH.
 */
export const SNAPSHOT = fileURLToPath(new URL("./deployed.generated.json", import.meta.url));

/** Builds the base, Flux and Argo CD overlays and reads who runs as what. */
export function buildDeployed(): Deployed {
  const base = build(OVERLAYS.base);
  const flux = build(OVERLAYS.flux);
  const argocd = build(OVERLAYS.argocd);
  const webhook = build(OVERLAYS.webhook);
  const withSidecar = (w: Workload) => w.spec.template.spec.containers.some((c) => c.name === SIDECAR);
  return {
    rbac: [...base, ...flux, ...argocd, ...webhook].filter((o) => RBAC_KINDS.has(o.kind)),
    // Cluster-scoped: kustomize gives them the overlay's namespace, which the API server drops.
    admission: base
      .filter((o) => ADMISSION_KINDS.has(o.kind))
      .map((o) => ({ ...o, metadata: { ...o.metadata, namespace: undefined } }) as K8sObject),
    serviceAccounts: {
      gateway: serviceAccountOf(base, (w) => w.metadata.name === "applygate-gateway", "the gateway"),
      worker: serviceAccountOf(base, (w) => w.metadata.name === "applygate-worker", "the worker"),
      mirror: serviceAccountOf(base, (w) => w.metadata.name === "applygate-mirror", "the mirror"),
      flux: serviceAccountOf(flux, withSidecar, "the Flux sidecar"),
      argocd: serviceAccountOf(argocd, withSidecar, "the Argo CD sidecar"),
      webhook: serviceAccountOf(
        webhook,
        (w) => w.metadata.name === "applygate-webhook",
        "the webhook applier",
      ),
    },
  };
}

/** Who runs as what: built from the manifests once per process, or read from the snapshot without kubectl. */
export function deployedIdentities(): Deployed {
  cached ??= KUBECTL_AVAILABLE ? buildDeployed() : (JSON.parse(readFileSync(SNAPSHOT, "utf8")) as Deployed);
  return cached;
}

/** The ServiceAccount's username on the API server. */
export const usernameOf = (sa: ServiceAccountRef) => `system:serviceaccount:${sa.namespace}:${sa.name}`;

/** `npm run gen:deployed`: writes the snapshot from a fresh build. */
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  if (!KUBECTL_AVAILABLE) throw new Error("gen:deployed needs kubectl on PATH to build the manifests");
  writeFileSync(SNAPSHOT, `${JSON.stringify(buildDeployed(), null, 2)}\n`);
  console.log(`wrote ${SNAPSHOT}`);
}
