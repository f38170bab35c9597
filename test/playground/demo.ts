/** The demo repository and cluster objects the playground starts with. */
import { createHash } from "node:crypto";

export const DEMO_NAMESPACE = "demo";
export const DEMO_REPO = "demo";
export const DEMO_BRANCH = "main";
export const WEBHOOK_TOKEN = "playground-webhook-token";
export const INTAKE_TOKEN = "playground-intake-token";

/** The small app folder the demo repository holds: one for Flux, one for Argo CD. */
export function demoFiles(): Record<string, string> {
  const config = (name: string, ns: string) =>
    [
      "apiVersion: v1",
      "kind: ConfigMap",
      "metadata:",
      `  name: ${name}`,
      `  namespace: ${ns}`,
      "data:",
      '  replicas: "1"',
      "  greeting: hello",
      "",
    ].join("\n");
  return {
    "README.md": "# demo\n\nApplied by Flux (apps/flux) and Argo CD (apps/argocd), held by applygate.\n",
    "apps/flux/app-config.yaml": config("app-config", "flux-app"),
    "apps/argocd/app-config.yaml": config("app-config", "argo-app"),
  };
}

/** Flux's receiver convention: the hook path is the hex sha256 of token + name + namespace. */
export function hookPathFor(token: string, name: string, namespace: string): string {
  return `/hook/${createHash("sha256")
    .update(token + name + namespace)
    .digest("hex")}`;
}

/** Namespaces, GitProvider, Secrets and GitTargets of the demo, as YAML documents. */
export function demoObjectsYaml(repoUrl: string): string {
  const b64 = (s: string) => Buffer.from(s).toString("base64");
  return `
apiVersion: v1
kind: Namespace
metadata: {name: ${DEMO_NAMESPACE}}
---
apiVersion: v1
kind: Namespace
metadata: {name: flux-app}
---
apiVersion: v1
kind: Namespace
metadata: {name: argo-app}
---
apiVersion: v1
kind: Secret
metadata: {name: demo-webhook, namespace: ${DEMO_NAMESPACE}}
data: {token: ${b64(WEBHOOK_TOKEN)}}
---
apiVersion: v1
kind: Secret
metadata: {name: demo-intake, namespace: ${DEMO_NAMESPACE}}
data: {token: ${b64(INTAKE_TOKEN)}}
---
apiVersion: applygate.dev/v1alpha1
kind: GitProvider
metadata: {name: demo, namespace: ${DEMO_NAMESPACE}}
spec:
  url: ${repoUrl}
  type: gitea
  webhookSecretRef: {name: demo-webhook}
---
apiVersion: applygate.dev/v1alpha1
kind: GitTarget
metadata: {name: flux-app, namespace: ${DEMO_NAMESPACE}}
spec:
  providerRef: {name: demo}
  branch: ${DEMO_BRANCH}
  path: apps/flux
  claimRef: {kind: FluxClaim, name: flux-app}
  onRefusal: Reapply
  intakeSecretRef: {name: demo-intake}
---
apiVersion: applygate.dev/v1alpha1
kind: GitTarget
metadata: {name: argo-app, namespace: ${DEMO_NAMESPACE}}
spec:
  providerRef: {name: demo}
  branch: ${DEMO_BRANCH}
  path: apps/argocd
  claimRef: {kind: ArgoCDClaim, name: argo-app}
  onRefusal: Reapply
  intakeSecretRef: {name: demo-intake}
`;
}
