/** The demo repository and cluster objects the playground starts with. */
import { createHash } from "node:crypto";
import { objectPath, objectYaml } from "../../queue/git/layout.js";

export const DEMO_NAMESPACE = "demo";
export const DEMO_REPO = "demo";
/** The demo GitProvider (namespace DEMO_NAMESPACE): its branch keys begin with it. */
export const DEMO_PROVIDER = "demo";
export const DEMO_BRANCH = "main";
export const WEBHOOK_TOKEN = "playground-webhook-token";
export const INTAKE_TOKEN = "playground-intake-token";

/** Where the demo's ConfigMap of each app lives: the path the worker mirrors that object to. */
export const DEMO_APPS = {
  flux: { folder: "apps/flux", namespace: "flux-app", name: "app-config" },
  argocd: { folder: "apps/argocd", namespace: "argo-app", name: "app-config" },
} as const;
export type DemoApp = keyof typeof DEMO_APPS;

/** The third folder, applied by the playground's deployer through a WebhookClaim. */
export const DEMO_WEBHOOK_APP = {
  folder: "apps/webhook",
  namespace: "webhook-app",
  name: "app-config",
  claim: "webhook-app",
  key: "playground-deployer-hmac-key",
  /** The deployer's own ServiceAccount (it applies with its identity, never applygate's). */
  serviceAccount: { namespace: DEMO_NAMESPACE, name: "playground-deployer" },
  /** The secret of the Git host's push webhook to the deployer (its trigger when nothing holds it). */
  pushSecret: "playground-deployer-push-secret",
} as const;

/** Every folder the playground applies: Flux's, Argo CD's and the webhook deployer's. */
export const PLAYGROUND_APPS = {
  ...DEMO_APPS,
  webhook: {
    folder: DEMO_WEBHOOK_APP.folder,
    namespace: DEMO_WEBHOOK_APP.namespace,
    name: DEMO_WEBHOOK_APP.name,
  },
} as const;
export type PlaygroundApp = keyof typeof PLAYGROUND_APPS;

/** The GitTarget (and claim) of each app, in the demo namespace. */
export const DEMO_TARGETS: Record<PlaygroundApp, string> = {
  flux: "flux-app",
  argocd: "argo-app",
  webhook: DEMO_WEBHOOK_APP.claim,
};

/** The webhook app's ConfigMap as Git and the cluster hold it. */
export function demoWebhookConfigMap(data: Record<string, string> = {}): Record<string, unknown> {
  return demoConfigMap("webhook", data);
}

export function demoWebhookConfigPath(): string {
  return demoConfigPath("webhook");
}

/** The demo ConfigMap of an app, as the cluster and Git hold it. */
export function demoConfigMap(
  app: PlaygroundApp,
  data: Record<string, string> = {},
): Record<string, unknown> {
  const a = PLAYGROUND_APPS[app];
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: a.name, namespace: a.namespace },
    data: { greeting: "hello", replicas: "1", ...data },
  };
}

/** The file of the demo ConfigMap of an app (the layout of objects in Git). */
export function demoConfigPath(app: PlaygroundApp): string {
  const a = PLAYGROUND_APPS[app];
  return objectPath(a.folder, { apiVersion: "v1", kind: "ConfigMap", namespace: a.namespace, name: a.name });
}

/**
 * The small app folder the demo repository holds: one for Flux, one for Argo CD. Each object sits
 * at the path the worker mirrors it to, so an API edit changes that very file.
 */
export function demoFiles(): Record<string, string> {
  return {
    "README.md":
      "# demo\n\nApplied by Flux (apps/flux), Argo CD (apps/argocd) and a webhook deployer (apps/webhook), held by applygate.\n",
    [demoConfigPath("flux")]: objectYaml(demoConfigMap("flux")),
    [demoConfigPath("argocd")]: objectYaml(demoConfigMap("argocd")),
    [demoWebhookConfigPath()]: objectYaml(demoWebhookConfigMap()),
  };
}

/** Flux's receiver convention: the hook path is the hex sha256 of token + name + namespace. */
export function hookPathFor(token: string, name: string, namespace: string): string {
  return `/hook/${createHash("sha256")
    .update(token + name + namespace)
    .digest("hex")}`;
}

/** The ScopeGrant the demo ships: its GitTargets may hold objects in the apps' namespaces. */
export const DEMO_GRANT = {
  name: "demo-apps",
  namespaces: [DEMO_APPS.flux.namespace, DEMO_APPS.argocd.namespace, DEMO_WEBHOOK_APP.namespace],
} as const;

/** Namespaces, GitProvider, Secrets, ScopeGrant and GitTargets of the demo, as YAML documents. */
export function demoObjectsYaml(
  repoUrl: string,
  opts: {
    /** A GitTarget's commit window, idle seconds (the default 5 s when not named). */
    commitIdleSeconds?: Partial<Record<PlaygroundApp, number>>;
  } = {},
): string {
  const b64 = (s: string) => Buffer.from(s).toString("base64");
  const commitWindow = (app: PlaygroundApp) => {
    const idle = opts.commitIdleSeconds?.[app];
    return idle === undefined
      ? ""
      : `\n  commitWindow: {idleSeconds: ${idle}, maxSeconds: ${Math.max(idle, 60)}}`;
  };
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
kind: Namespace
metadata: {name: ${DEMO_WEBHOOK_APP.namespace}}
---
apiVersion: v1
kind: Secret
metadata: {name: demo-deployer-hmac, namespace: ${DEMO_NAMESPACE}}
data: {hmacKey: ${b64(DEMO_WEBHOOK_APP.key)}}
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
metadata: {name: ${DEMO_PROVIDER}, namespace: ${DEMO_NAMESPACE}}
spec:
  url: ${repoUrl}
  type: gitea
  webhookSecretRef: {name: demo-webhook}
---
# The GitTargets live in ${DEMO_NAMESPACE} and hold objects in the apps' namespaces: only a cluster
# administrator's ScopeGrant lets them (a GitTarget holds its own namespace only).
apiVersion: applygate.dev/v1alpha1
kind: ScopeGrant
metadata: {name: ${DEMO_GRANT.name}}
spec:
  targets: [{namespace: ${DEMO_NAMESPACE}, name: flux-app}, {namespace: ${DEMO_NAMESPACE}, name: argo-app}, {namespace: ${DEMO_NAMESPACE}, name: ${DEMO_WEBHOOK_APP.claim}}]
  namespaces: [${DEMO_GRANT.namespaces.join(", ")}]
---
apiVersion: applygate.dev/v1alpha1
kind: GitTarget
metadata: {name: flux-app, namespace: ${DEMO_NAMESPACE}}
spec:
  providerRef: {name: demo}
  branch: ${DEMO_BRANCH}
  path: apps/flux${commitWindow("flux")}
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
  path: apps/argocd${commitWindow("argocd")}
  claimRef: {kind: ArgoCDClaim, name: argo-app}
  onRefusal: Reapply
  intakeSecretRef: {name: demo-intake}
---
apiVersion: applygate.dev/v1alpha1
kind: GitTarget
metadata: {name: ${DEMO_WEBHOOK_APP.claim}, namespace: ${DEMO_NAMESPACE}}
spec:
  providerRef: {name: demo}
  branch: ${DEMO_BRANCH}
  path: ${DEMO_WEBHOOK_APP.folder}${commitWindow("webhook")}
  claimRef: {kind: WebhookClaim, name: ${DEMO_WEBHOOK_APP.claim}}
  onRefusal: Reapply
  intakeSecretRef: {name: demo-intake}
---
# The deployer's own identity: it may apply ConfigMaps in its app's namespace, nothing else.
apiVersion: v1
kind: ServiceAccount
metadata: {name: ${DEMO_WEBHOOK_APP.serviceAccount.name}, namespace: ${DEMO_WEBHOOK_APP.serviceAccount.namespace}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: playground-deployer, namespace: ${DEMO_WEBHOOK_APP.namespace}}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get, create, patch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: playground-deployer, namespace: ${DEMO_WEBHOOK_APP.namespace}}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: playground-deployer}
subjects: [{kind: ServiceAccount, name: ${DEMO_WEBHOOK_APP.serviceAccount.name}, namespace: ${DEMO_WEBHOOK_APP.serviceAccount.namespace}}]
`;
}

/**
 * A WatchRule for each demo folder: the mirror writes every API edit of the app's ConfigMaps into
 * the folder. The apps' namespaces are other than the rules' own, which the demo ScopeGrant allows.
 */
export function demoWatchRulesYaml(): string {
  return (["flux", "argocd", "webhook"] as const)
    .map((app) => {
      const target = DEMO_TARGETS[app];
      return `
apiVersion: applygate.dev/v1alpha1
kind: WatchRule
metadata: {name: ${target}, namespace: ${DEMO_NAMESPACE}}
spec:
  targetRef: {name: ${target}}
  kinds: [{group: "", version: v1, kind: ConfigMap}]
  namespaces: [${PLAYGROUND_APPS[app].namespace}]
`;
    })
    .join("---\n");
}

/** Intervals of the demo appliers; the claims hold them, so they matter only when nothing does. */
export interface ApplierTimers {
  /** GitRepository and Kustomization `spec.interval` (a Flux duration). */
  fluxInterval: string;
}

export const FLUX_NAMESPACE = "flux-system";
export const ARGOCD_NAMESPACE = "argocd";
export const DEMO_APPLIERS = {
  flux: { namespace: FLUX_NAMESPACE, name: "flux-app" },
  argocd: { namespace: ARGOCD_NAMESPACE, name: "argo-app" },
} as const;

/** The GitRepository, Kustomization, AppProject and Application that apply the demo folders. */
export function demoAppliersYaml(repoUrl: string, t: ApplierTimers = { fluxInterval: "1m" }) {
  return `
apiVersion: v1
kind: Namespace
metadata: {name: ${FLUX_NAMESPACE}}
---
apiVersion: v1
kind: Namespace
metadata: {name: ${ARGOCD_NAMESPACE}}
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: demo, namespace: ${FLUX_NAMESPACE}}
spec:
  interval: ${t.fluxInterval}
  url: ${repoUrl}
  ref: {branch: ${DEMO_BRANCH}}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: ${DEMO_APPLIERS.flux.name}, namespace: ${FLUX_NAMESPACE}}
spec:
  interval: ${t.fluxInterval}
  prune: true
  path: ./${DEMO_APPS.flux.folder}
  sourceRef: {kind: GitRepository, name: demo}
---
apiVersion: argoproj.io/v1alpha1
kind: AppProject
metadata: {name: default, namespace: ${ARGOCD_NAMESPACE}}
spec:
  sourceRepos: ["*"]
  destinations: [{namespace: "*", server: "*"}]
---
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: ${DEMO_APPLIERS.argocd.name}, namespace: ${ARGOCD_NAMESPACE}}
spec:
  project: default
  # recurse: objects sit in folders by group, kind and namespace (the layout of objects in Git).
  source: {repoURL: ${repoUrl}, path: ${DEMO_APPS.argocd.folder}, targetRevision: ${DEMO_BRANCH}, directory: {recurse: true}}
  destination: {server: https://kubernetes.default.svc, namespace: ${DEMO_APPS.argocd.namespace}}
  syncPolicy:
    # Automated sync on, as a team would run it; the ArgoCDClaim switches it off while it holds it.
    automated: {prune: true}
`;
}

/**
 * The FluxClaim, ArgoCDClaim and (given the deployer's URL) WebhookClaim the demo GitTargets
 * name, and the grants that let them hold.
 */
export function demoClaimsYaml(deployerUrl?: string): string {
  const webhook = deployerUrl
    ? `---
apiVersion: applygate.dev/v1alpha1
kind: WebhookClaim
metadata: {name: ${DEMO_WEBHOOK_APP.claim}, namespace: ${DEMO_NAMESPACE}}
spec:
  url: ${deployerUrl}
  insecure: true
  secretRef: {name: demo-deployer-hmac}
  signature: generic-hmac
  completion: {mode: callback, budgetSeconds: 60}
  fieldManagers: [playground-deployer]
`
    : "";
  return `
apiVersion: applygate.dev/v1alpha1
kind: ApplierGrant
metadata: {name: demo, namespace: ${FLUX_NAMESPACE}}
spec:
  from: [{namespace: ${DEMO_NAMESPACE}, kind: FluxClaim}]
  to: [{name: ${DEMO_APPLIERS.flux.name}}]
---
apiVersion: applygate.dev/v1alpha1
kind: ApplierGrant
metadata: {name: demo, namespace: ${ARGOCD_NAMESPACE}}
spec:
  from: [{namespace: ${DEMO_NAMESPACE}, kind: ArgoCDClaim}]
  to: [{name: ${DEMO_APPLIERS.argocd.name}}]
---
apiVersion: applygate.dev/v1alpha1
kind: FluxClaim
metadata: {name: flux-app, namespace: ${DEMO_NAMESPACE}}
spec:
  kustomizationRef: {name: ${DEMO_APPLIERS.flux.name}, namespace: ${FLUX_NAMESPACE}}
---
apiVersion: applygate.dev/v1alpha1
kind: ArgoCDClaim
metadata: {name: argo-app, namespace: ${DEMO_NAMESPACE}}
spec:
  applicationRef: {name: ${DEMO_APPLIERS.argocd.name}, namespace: ${ARGOCD_NAMESPACE}}
${webhook}`;
}

/**
 * The RoleBinding docs/install.md ("Connect a repository") tells a user to create in a namespace that holds
 * GitProviders and GitTargets: the named ServiceAccounts may get Secrets there by name.
 */
export function secretReaderYaml(
  namespace: string,
  serviceAccounts: { namespace: string; name: string }[],
  role: "applygate-secret-reader" | "applygate-secret-watcher" = "applygate-secret-reader",
) {
  return JSON.stringify({
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "RoleBinding",
    metadata: { name: role, namespace },
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: role },
    subjects: serviceAccounts.map((sa) => ({ kind: "ServiceAccount", ...sa })),
  });
}
