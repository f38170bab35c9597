/** Builds kustomize overlays with the real `kubectl kustomize` and loads the objects. */
import { execFileSync } from "node:child_process";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";

export const REPO_ROOT = resolve(fileURLToPath(new URL("../..", import.meta.url)));

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [key: string]: unknown;
}

function hasKubectl(): boolean {
  try {
    execFileSync("kubectl", ["version", "--client"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

export const KUBECTL_AVAILABLE = hasKubectl();
if (!KUBECTL_AVAILABLE)
  console.warn(
    "NOTICE: kubectl not found on PATH: tests that build the manifests are skipped, and the playground reads its RBAC from test/playground/deployed.generated.json.",
  );

/** Every overlay a user builds, relative to the repository root. */
export const OVERLAYS = {
  base: "manifests/base",
  externalRedis: "manifests/examples/external-redis",
  monitoring: "manifests/monitoring",
  examples: "manifests/examples/resources",
  flux: "test/manifests/fixtures/flux-system",
  argocd: "test/manifests/fixtures/argocd",
  /** The webhook applier's own Deployment (added beside the base). */
  webhook: "manifests/webhook",
  /** As docs/install.md shows: upstream's install.yaml (no namespaces) under `namespace: argocd`. */
  argocdUpstream: "test/manifests/fixtures/argocd-upstream",
} as const;

export function build(dir: string): K8sObject[] {
  const out = execFileSync("kubectl", ["kustomize", resolve(REPO_ROOT, dir)], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  });
  return parseAllDocuments(out).map((d) => d.toJS() as K8sObject);
}

export function find(objects: K8sObject[], kind: string, name: string): K8sObject {
  const found = objects.filter((o) => o.kind === kind && o.metadata.name === name);
  if (found.length !== 1) throw new Error(`expected one ${kind} ${name}, found ${found.length}`);
  return found[0] as K8sObject;
}
