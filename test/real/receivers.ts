// The push receivers people install today, on the real control plane beside real Flux
// (test/real/flux.ts) and real Argo CD (test/real/argocd.ts):
//
//   const nc = await startNotificationController(cluster);          // Flux's Receiver endpoint
//   const hook = await createGithubReceiver(kc, { namespace, name: "apps", secret });
//   await deliverGithubPush(nc.receiverUrl + hook, secret, githubPush({...}));
//
//   const server = await startArgoCDServer(cluster, argocd, { githubSecret });  // /api/webhook
//   await deliverGithubPush(server.webhookUrl, githubSecret, githubPush({...}));
//
// notification-controller is the binary `npm run real:build` makes, under its own ServiceAccount
// with its own RBAC read from the module cache, as flux.ts runs the other Flux controllers.
// argocd-server is the same `argocd` binary as Argo CD's other components, plain HTTP on loopback
// (--insecure), its webhook secret in argocd-secret as Argo CD documents.
import { createHmac, randomUUID } from "node:crypto";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from "@kubernetes/client-node";
import { stringify } from "yaml";
import { until } from "../support/wait.js";
import { serviceAccountKubeconfig as argoServiceAccountKubeconfig, type RealArgoCD } from "./argocd.js";
import { findRealBinaries } from "./binaries.js";
import { logTail, type RealCluster, startReady, stopProcess } from "./cluster.js";
import {
  controllerRbac,
  FLUX_NAMESPACE,
  GIT_REPOSITORIES,
  kubectlApply,
  startFluxController,
} from "./flux.js";
import { upstreamModule } from "./upstream.js";

const HOST = "127.0.0.1";
const NOTIFICATION_MODULE = "github.com/fluxcd/notification-controller";

export const RECEIVERS = {
  group: "notification.toolkit.fluxcd.io",
  version: "v1",
  plural: "receivers",
};

// ---- the signed GitHub push, the same bytes for every receiver ---------------------------------

export interface GithubPushSpec {
  /** The repository's clone URL on our Git server (…/<name>.git). */
  cloneUrl: string;
  branch?: string;
  before: string;
  after: string;
  /** Files the commit changed (Argo CD reads them against manifest-generate-paths). */
  modified?: string[];
}

/** A GitHub `push` event for one commit, with the fields each receiver reads. */
export function githubPush(spec: GithubPushSpec): Record<string, unknown> {
  const branch = spec.branch ?? "main";
  const htmlUrl = spec.cloneUrl.replace(/\.git$/, "");
  const name = htmlUrl.slice(htmlUrl.lastIndexOf("/") + 1);
  const commit = {
    id: spec.after,
    message: "push",
    timestamp: new Date(0).toISOString(),
    url: `${htmlUrl}/commit/${spec.after}`,
    added: [],
    removed: [],
    modified: spec.modified ?? [],
  };
  return {
    ref: `refs/heads/${branch}`,
    before: spec.before,
    after: spec.after,
    created: false,
    deleted: false,
    forced: false,
    compare: `${htmlUrl}/compare/${spec.before.slice(0, 12)}...${spec.after.slice(0, 12)}`,
    commits: [commit],
    head_commit: commit,
    repository: {
      id: 1,
      name,
      full_name: `bench/${name}`,
      html_url: htmlUrl,
      clone_url: spec.cloneUrl,
      url: htmlUrl,
      default_branch: branch,
      private: false,
    },
    pusher: { name: "bench", email: "bench@example.invalid" },
    sender: { login: "bench", id: 1 },
  };
}

/** The headers GitHub sends with a push delivery signed with `secret` (SHA-256 and SHA-1). */
export function githubHeaders(secret: string, body: string): Record<string, string> {
  return {
    "content-type": "application/json",
    "user-agent": "GitHub-Hookshot/bench",
    "x-github-event": "push",
    "x-github-delivery": randomUUID(),
    "x-hub-signature-256": `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`,
    "x-hub-signature": `sha1=${createHmac("sha1", secret).update(body).digest("hex")}`,
  };
}

/** Delivers a push as GitHub would; fails on any answer but 2xx, naming it. */
export async function deliverGithubPush(
  url: string,
  secret: string,
  payload: Record<string, unknown>,
): Promise<number> {
  const body = JSON.stringify(payload);
  const res = await fetch(url, { method: "POST", headers: githubHeaders(secret, body), body });
  const text = await res.text();
  if (res.status < 200 || res.status >= 300) throw new Error(`${url} answered ${res.status}: ${text}`);
  return res.status;
}

// ---- Flux: notification-controller and a Receiver ------------------------------------------------

export interface NotificationController {
  /** http://127.0.0.1:<port> of the receiver endpoint; a Receiver's status.webhookPath goes after it. */
  receiverUrl: string;
  version: string;
  logPath: string;
  pid: number;
  stop(): Promise<void>;
}

/** notification-controller in flux-system (startRealFlux installed its CRDs), ready to receive. */
export async function startNotificationController(
  cluster: RealCluster,
  options: { readyTimeoutMs?: number; quiet?: boolean } = {},
): Promise<NotificationController> {
  const bins = findRealBinaries(["notification-controller", "kubectl"]);
  if (!bins.built) throw new Error(bins.message);
  const t0 = Date.now();
  const mod = upstreamModule("flux", NOTIFICATION_MODULE);
  const name = "notification-controller";
  const dir = join(cluster.dir, "flux");
  await mkdir(dir, { recursive: true });
  const install = [
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name, namespace: FLUX_NAMESPACE } },
    ...(await controllerRbac(bins.path("kubectl"), mod, name)),
    // Flux's install (flux2 manifests/rbac/controller.yaml) binds every controller to its
    // `crd-controller` ClusterRole, all verbs on the toolkit groups: the Receiver reads and
    // annotates the GitRepository through it. Its own config/rbac grants only its own kinds.
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name: "flux-crd-controller" },
      rules: [
        {
          apiGroups: [
            "source.toolkit.fluxcd.io",
            "kustomize.toolkit.fluxcd.io",
            "notification.toolkit.fluxcd.io",
          ],
          resources: ["*"],
          verbs: ["*"],
        },
      ],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: `flux-crd-controller-${name}` },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "flux-crd-controller" },
      subjects: [{ kind: "ServiceAccount", name, namespace: FLUX_NAMESPACE }],
    },
  ];
  await kubectlApply(
    bins.path("kubectl"),
    cluster.kubeconfigPath,
    ["-f", "-"],
    install.map((o) => stringify(o)).join("---\n"),
  );
  const { proc: p, ports } = await startFluxController(cluster, {
    name,
    bin: bins.path(name),
    dir,
    ports: 4,
    args: ([, , events, receiver]) => [
      `--events-addr=${HOST}:${events}`,
      `--receiverAddr=${HOST}:${receiver}`,
    ],
    controller: "receiver",
    timeoutMs: options.readyTimeoutMs ?? 120_000,
  });
  if (!options.quiet) {
    console.log(
      `real notification-controller ${mod.version} ready in ${((Date.now() - t0) / 1000).toFixed(1)}s`,
    );
  }
  return {
    receiverUrl: `http://${HOST}:${ports[3]}`,
    version: mod.version,
    logPath: p.logPath,
    pid: p.child.pid ?? 0,
    stop: () => stopProcess(p, 15_000),
  };
}

export interface GithubReceiverSpec {
  namespace: string;
  /** The GitRepository it asks to reconcile; the Receiver and its Secret are named after it. */
  gitRepository: string;
  secret: string;
}

/**
 * A Receiver of type github for the GitRepository (as `flux create receiver` writes it: events
 * push, the token in a Secret), ready; answers its status.webhookPath.
 */
export async function createGithubReceiver(kc: KubeConfig, spec: GithubReceiverSpec): Promise<string> {
  const name = `${spec.gitRepository}-github`;
  await kc.makeApiClient(CoreV1Api).createNamespacedSecret({
    namespace: spec.namespace,
    body: { metadata: { name, namespace: spec.namespace }, stringData: { token: spec.secret } },
  });
  const custom = kc.makeApiClient(CustomObjectsApi);
  await custom.createNamespacedCustomObject({
    ...RECEIVERS,
    namespace: spec.namespace,
    body: {
      apiVersion: `${RECEIVERS.group}/${RECEIVERS.version}`,
      kind: "Receiver",
      metadata: { name, namespace: spec.namespace },
      spec: {
        type: "github",
        events: ["push"],
        secretRef: { name },
        resources: [
          {
            apiVersion: `${GIT_REPOSITORIES.group}/${GIT_REPOSITORIES.version}`,
            kind: "GitRepository",
            name: spec.gitRepository,
          },
        ],
      },
    },
  });
  return until(
    async () => {
      const r = (await custom.getNamespacedCustomObject({
        ...RECEIVERS,
        namespace: spec.namespace,
        name,
      })) as {
        status?: { webhookPath?: string; conditions?: { type: string; status: string }[] };
      };
      const ready = r.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");
      return ready ? r.status?.webhookPath : undefined;
    },
    `Receiver ${spec.namespace}/${name} to be ready`,
    { timeoutMs: 60_000, everyMs: 100, retryErrors: true },
  );
}

// ---- Argo CD: argocd-server's /api/webhook -----------------------------------------------------

export interface ArgoCDServer {
  /** http://127.0.0.1:<port>/api/webhook */
  webhookUrl: string;
  logPath: string;
  pid: number;
  logTail(lines?: number): string;
  stop(): Promise<void>;
}

/**
 * argocd-server beside startRealArgoCD's controller and repo-server (same Redis), plain HTTP on
 * 127.0.0.1, under its ServiceAccount's token, with `webhook.github.secret` in argocd-secret.
 */
export async function startArgoCDServer(
  cluster: RealCluster,
  argocd: RealArgoCD,
  options: { githubSecret: string; readyTimeoutMs?: number; quiet?: boolean },
): Promise<ArgoCDServer> {
  const bins = findRealBinaries(["argocd-server"]);
  if (!bins.built) throw new Error(bins.message);
  const t0 = Date.now();
  const namespace = argocd.namespace;
  const core = cluster.kubeConfig().makeApiClient(CoreV1Api);
  const secret = await core.readNamespacedSecret({ name: "argocd-secret", namespace });
  secret.data = {
    ...secret.data,
    "webhook.github.secret": Buffer.from(options.githubSecret).toString("base64"),
  };
  await core.replaceNamespacedSecret({ name: "argocd-secret", namespace, body: secret });

  const dir = join(cluster.dir, "argocd");
  const ownDir = join(dir, "server");
  for (const sub of ["home", "tmp", "tls", "ssh", "gnupg", "static"]) {
    await mkdir(join(ownDir, sub), { recursive: true });
  }
  const kubeconfig = join(ownDir, "argocd-server.kubeconfig");
  await argoServiceAccountKubeconfig(cluster, "argocd-server", kubeconfig);
  const env: NodeJS.ProcessEnv = {
    HOME: join(ownDir, "home"),
    TMPDIR: join(ownDir, "tmp"),
    ARGOCD_TLS_DATA_PATH: join(ownDir, "tls"),
    ARGOCD_SSH_DATA_PATH: join(ownDir, "ssh"),
    ARGOCD_GNUPGHOME: join(ownDir, "gnupg"),
    ARGOCD_GPG_ENABLED: "false",
    ARGOCD_FAKE_IN_CLUSTER: "true",
    KUBECONFIG: kubeconfig,
  };
  const { proc: p, ports } = await startReady({
    name: "argocd-server",
    bin: bins.path("argocd-server"),
    dir: ownDir,
    env,
    ports: 2,
    args: ([port, metricsPort]) => [
      `--kubeconfig=${kubeconfig}`,
      `--namespace=${namespace}`,
      "--insecure",
      `--address=${HOST}`,
      `--port=${port}`,
      `--metrics-address=${HOST}`,
      `--metrics-port=${metricsPort}`,
      `--repo-server=${argocd.repoServer}`,
      "--repo-server-plaintext",
      `--redis=${new URL(argocd.redisUrl).host}`,
      // No Dex: the webhook needs no login, and no UI is served.
      "--dex-server=",
      `--staticassets=${join(ownDir, "static")}`,
      "--loglevel=info",
    ],
    ready: async ([port]) => (await fetch(`http://${HOST}:${port}/healthz?full=true`)).ok,
    timeoutMs: options.readyTimeoutMs ?? 120_000,
    killAfterMs: 10_000,
  });
  if (!options.quiet) {
    console.log(`real argocd-server (webhook) ready in ${((Date.now() - t0) / 1000).toFixed(1)}s`);
  }
  return {
    webhookUrl: `http://${HOST}:${ports[0]}/api/webhook`,
    logPath: p.logPath,
    pid: p.child.pid ?? 0,
    logTail: (lines) => logTail(p, lines),
    stop: () => stopProcess(p, 10_000),
  };
}
