// Push → applied on the real components: one setup per way a Git push reaches an applier. Each
// push commits to our Git smart-HTTP server (test/git/server.ts), then delivers the same signed
// GitHub push event to the setup's receiver, and times from the delivery until the applier reports
// the new commit applied: a Kustomization's status.lastAppliedRevision `main@sha1:<sha>`, an
// Application's last operation `Succeeded` at <sha>.
//
// Shared by test/real/receivers.real.test.ts (a few pushes, proving each setup applies what was
// pushed) and test/bench/receivers.ts (the figures).
import {
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  RbacAuthorizationV1Api,
} from "@kubernetes/client-node";
import { connectRedis } from "../../queue/redis.js";
import { GitPeer } from "../git/peer.js";
import type { GitServer } from "../git/server.js";
import { until } from "../support/wait.js";
import { installApplygate, type Running, startComponent, startSidecar } from "./applygate.js";
import { argoApplication, createApplication } from "./argocd.js";
import type { RealCluster } from "./cluster.js";
import { createGitSource, KUSTOMIZATIONS } from "./flux.js";
import { deliverGithubPush, githubPush } from "./receivers.js";

/** How often the applier's status is read while waiting (the figures' resolution). */
export const POLL_MS = 20;

export interface PushTiming {
  sha: string;
  /** Delivery of the signed push → the applier reports `sha` applied. */
  ms: number;
  /** What the applied object said, for a test to assert on. */
  appliedRevision: string;
  /** The payload's value once applied, read back from the cluster. */
  value: string | undefined;
}

export interface Setup {
  name: string;
  namespace: string;
  /** Commits value `v` to the watched file, delivers the push, waits until it is applied. */
  push(v: string, timeoutMs?: number): Promise<PushTiming>;
  remove(): Promise<void>;
}

const FILE = "apps/a.yaml";
export const configMap = (v: string) =>
  `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  v: "${v}"\n`;

export interface SetupContext {
  kc: KubeConfig;
  git: GitServer;
}

/** A namespace and a repository holding apps/a.yaml (value "0"), cloned by a peer that pushes. */
async function repository(ctx: SetupContext, namespace: string) {
  await ctx.kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
  const url = await ctx.git.createRepo(namespace, { [FILE]: configMap("0") });
  const peer = await GitPeer.clone(url);
  return { url, peer };
}

const readValue = async (kc: KubeConfig, namespace: string) =>
  (await kc.makeApiClient(CoreV1Api).readNamespacedConfigMap({ namespace, name: "a" })).data?.v;

/**
 * The push loop shared by every setup: commit, deliver, wait for `applied(sha)` to answer the
 * applied revision.
 */
function pusher(
  ctx: SetupContext,
  namespace: string,
  url: string,
  peer: GitPeer,
  deliver: (payload: Record<string, unknown>) => Promise<void>,
  applied: (sha: string) => Promise<string | undefined>,
) {
  let before: string | undefined;
  return async (v: string, timeoutMs = 120_000): Promise<PushTiming> => {
    before ??= await ctx.git.tip(namespace);
    const sha = await peer.commitAndPush(FILE, configMap(v), `v ${v}`);
    const payload = githubPush({
      cloneUrl: url,
      before: before ?? "0".repeat(40),
      after: sha,
      modified: [FILE],
    });
    before = sha;
    const t0 = performance.now();
    await deliver(payload);
    const appliedRevision = await until(() => applied(sha), `${namespace}: ${sha} applied`, {
      timeoutMs,
      everyMs: POLL_MS,
      retryErrors: true,
    });
    const ms = performance.now() - t0;
    return { sha, ms, appliedRevision, value: await readValue(ctx.kc, namespace) };
  };
}

/** A Kustomization's applied revision when it is `sha`'s. */
export const kustomizationApplied = (kc: KubeConfig, namespace: string, name = "apps") => {
  const custom = kc.makeApiClient(CustomObjectsApi);
  return async (sha: string): Promise<string | undefined> => {
    const ks = (await custom.getNamespacedCustomObject({ ...KUSTOMIZATIONS, namespace, name })) as {
      status?: { lastAppliedRevision?: string };
    };
    const rev = ks.status?.lastAppliedRevision;
    return rev === `main@sha1:${sha}` ? rev : undefined;
  };
};

/**
 * `sha` once the Application's last operation succeeded at it. Not its sync status: after a sync
 * applygate pinned to the commit, status.sync.revision still names what the repo-server last
 * resolved the branch to, until a refresh resolves it again (test/real/RESULTS.md).
 */
export const applicationApplied = (kc: KubeConfig, namespace: string, name: string) => {
  const custom = kc.makeApiClient(CustomObjectsApi);
  return async (sha: string): Promise<string | undefined> => {
    const app = (await custom.getNamespacedCustomObject({
      group: "argoproj.io",
      version: "v1alpha1",
      plural: "applications",
      namespace,
      name,
    })) as {
      status?: {
        sync?: { revision?: string };
        operationState?: { phase?: string; syncResult?: { revision?: string } };
      };
    };
    const op = app.status?.operationState;
    return op?.phase === "Succeeded" && op.syncResult?.revision === sha ? sha : undefined;
  };
};

/**
 * Plain Flux with a Receiver: the push goes to notification-controller, which asks
 * source-controller to fetch (requestedAt on the GitRepository); kustomize-controller applies the
 * new artifact.
 */
export async function fluxReceiverSetup(
  ctx: SetupContext,
  o: {
    namespace: string;
    receiverUrl: string;
    createReceiver: (namespace: string) => Promise<string>;
    secret: string;
  },
): Promise<Setup> {
  const { url, peer } = await repository(ctx, o.namespace);
  await createGitSource(ctx.kc, {
    namespace: o.namespace,
    url,
    path: "./apps",
    targetNamespace: o.namespace,
  });
  const applied = kustomizationApplied(ctx.kc, o.namespace);
  const first = await ctx.git.tip(o.namespace);
  await until(() => applied(first ?? ""), `${o.namespace}: first commit applied`, {
    timeoutMs: 120_000,
    everyMs: 100,
    retryErrors: true,
  });
  const hookPath = await o.createReceiver(o.namespace);
  return {
    name: "flux-receiver",
    namespace: o.namespace,
    push: pusher(
      ctx,
      o.namespace,
      url,
      peer,
      async (payload) => {
        await deliverGithubPush(o.receiverUrl + hookPath, o.secret, payload);
      },
      applied,
    ),
    remove: () => peer.remove(),
  };
}

/**
 * Plain Argo CD with its own webhook: the push goes to argocd-server's /api/webhook, which
 * refreshes the Applications of that repository and branch; automated sync applies the new commit.
 */
export async function argoWebhookSetup(
  ctx: SetupContext,
  o: { namespace: string; appName: string; webhookUrl: string; secret: string },
): Promise<Setup> {
  const { url, peer } = await repository(ctx, o.namespace);
  await createApplication(
    ctx.kc,
    argoApplication({
      name: o.appName,
      repoURL: url,
      path: "apps",
      destinationNamespace: o.namespace,
      syncPolicy: { automated: { prune: true, selfHeal: false } },
    }),
  );
  const applied = applicationApplied(ctx.kc, "argocd", o.appName);
  const first = await ctx.git.tip(o.namespace);
  await until(() => applied(first ?? ""), `${o.appName}: first commit applied`, {
    timeoutMs: 120_000,
    everyMs: 100,
    retryErrors: true,
  });
  return {
    name: "argocd-webhook",
    namespace: o.namespace,
    push: pusher(
      ctx,
      o.namespace,
      url,
      peer,
      async (payload) => {
        await deliverGithubPush(o.webhookUrl, o.secret, payload);
      },
      applied,
    ),
    remove: () => peer.remove(),
  };
}

// ---- through applygate -------------------------------------------------------------------------

const APPLYGATE = { group: "applygate.dev", version: "v1alpha1" };

/**
 * applygate installed as test/real/applygate.ts installs it (kubectl apply -k of the base and of
 * the Flux and Argo CD overlays), with its gateway, worker and the two sidecars running under
 * their ServiceAccounts' tokens. Install it before startRealFlux and startRealArgoCD: it makes
 * their namespaces (and the Secret applygate-redis in each).
 */
export async function startApplygate(cluster: RealCluster, redisUrl: string) {
  const installed = await installApplygate(cluster, { redisUrl, appliers: ["flux", "argocd"] });
  const running: Running[] = [];
  const stop = async () => {
    for (const r of running.reverse()) await r.stop();
    // Its keys live under the install's prefix in a Redis others may share.
    const client = connectRedis(redisUrl);
    let cursor = "0";
    do {
      const [next, keys] = await client.scan(cursor, "MATCH", `${installed.prefix}*`, "COUNT", 1000);
      cursor = next;
      if (keys.length) await client.del(...keys);
    } while (cursor !== "0");
    client.disconnect();
  };
  try {
    running.push(await startComponent(installed, "gateway"));
    running.push(await startComponent(installed, "worker"));
    return { installed, running, gatewayUrl: (running[0] as Running).url("http"), startSidecars, stop };
  } catch (err) {
    await stop();
    throw err;
  }
  /** The sidecars, once Flux and Argo CD run (each runs as its applier's ServiceAccount). */
  async function startSidecars() {
    running.push(await startSidecar(installed, "flux"));
    running.push(await startSidecar(installed, "argocd"));
  }
}

/**
 * A namespace admitting applygate's gateway and worker to its Secrets (docs/install.md step 4),
 * a GitProvider of type github for the repository with the push secret, and the GitTarget naming
 * the claim; answers the gateway's receiver path once it wrote it.
 */
async function applygateTarget(
  ctx: SetupContext,
  o: { namespace: string; url: string; secret: string; claim: { kind: string; name: string } },
): Promise<string> {
  const rbac = ctx.kc.makeApiClient(RbacAuthorizationV1Api);
  for (const [name, role, sa] of [
    ["applygate-secret-reader", "applygate-secret-reader", "applygate-gateway"],
    ["applygate-secret-watcher", "applygate-secret-watcher", "applygate-worker"],
  ] as const) {
    await rbac.createNamespacedRoleBinding({
      namespace: o.namespace,
      body: {
        metadata: { name, namespace: o.namespace },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: role },
        subjects: [{ kind: "ServiceAccount", name: sa, namespace: "applygate-system" }],
      },
    });
  }
  await ctx.kc.makeApiClient(CoreV1Api).createNamespacedSecret({
    namespace: o.namespace,
    body: { metadata: { name: "push-secret", namespace: o.namespace }, stringData: { token: o.secret } },
  });
  const custom = ctx.kc.makeApiClient(CustomObjectsApi);
  await custom.createNamespacedCustomObject({
    ...APPLYGATE,
    plural: "gitproviders",
    namespace: o.namespace,
    body: {
      apiVersion: `${APPLYGATE.group}/${APPLYGATE.version}`,
      kind: "GitProvider",
      metadata: { name: "repo", namespace: o.namespace },
      spec: { url: o.url, type: "github", webhookSecretRef: { name: "push-secret" } },
    },
  });
  await custom.createNamespacedCustomObject({
    ...APPLYGATE,
    plural: "gittargets",
    namespace: o.namespace,
    body: {
      apiVersion: `${APPLYGATE.group}/${APPLYGATE.version}`,
      kind: "GitTarget",
      metadata: { name: "apps", namespace: o.namespace },
      spec: { providerRef: { name: "repo" }, branch: "main", path: "apps", claimRef: o.claim },
    },
  });
  return until(
    async () => {
      const p = (await custom.getNamespacedCustomObject({
        ...APPLYGATE,
        plural: "gitproviders",
        namespace: o.namespace,
        name: "repo",
      })) as { status?: { webhookPath?: string } };
      return p.status?.webhookPath;
    },
    `${o.namespace}: the gateway to write the GitProvider's webhook path`,
    { timeoutMs: 60_000, everyMs: 100, retryErrors: true },
  );
}

/** Waits until a claim holds its applier (InControl=True). */
async function inControl(ctx: SetupContext, namespace: string, plural: string, name: string) {
  const custom = ctx.kc.makeApiClient(CustomObjectsApi);
  await until(
    async () => {
      const c = (await custom.getNamespacedCustomObject({ ...APPLYGATE, plural, namespace, name })) as {
        status?: { conditions?: { type: string; status: string }[] };
      };
      return c.status?.conditions?.some((x) => x.type === "InControl" && x.status === "True");
    },
    `${namespace}/${name} in control`,
    { timeoutMs: 60_000, everyMs: 100, retryErrors: true },
  );
}

/**
 * Flux with applygate: the push goes to applygate's gateway; the branch worker asks the sidecar
 * beside kustomize-controller to apply the commit (a fetch of the GitRepository and one resume of
 * the Kustomization the FluxClaim holds suspended).
 */
export async function fluxApplygateSetup(
  ctx: SetupContext,
  o: { namespace: string; gatewayUrl: string; secret: string },
): Promise<Setup> {
  const { url, peer } = await repository(ctx, o.namespace);
  await createGitSource(ctx.kc, {
    namespace: o.namespace,
    url,
    path: "./apps",
    targetNamespace: o.namespace,
  });
  const applied = kustomizationApplied(ctx.kc, o.namespace);
  const first = await ctx.git.tip(o.namespace);
  await until(() => applied(first ?? ""), `${o.namespace}: first commit applied`, {
    timeoutMs: 120_000,
    everyMs: 100,
    retryErrors: true,
  });
  await ctx.kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
    ...APPLYGATE,
    plural: "fluxclaims",
    namespace: o.namespace,
    body: {
      apiVersion: `${APPLYGATE.group}/${APPLYGATE.version}`,
      kind: "FluxClaim",
      metadata: { name: "apps", namespace: o.namespace },
      spec: { kustomizationRef: { name: "apps", namespace: o.namespace } },
    },
  });
  const hookPath = await applygateTarget(ctx, {
    namespace: o.namespace,
    url,
    secret: o.secret,
    claim: { kind: "FluxClaim", name: "apps" },
  });
  await inControl(ctx, o.namespace, "fluxclaims", "apps");
  return {
    name: "flux-applygate",
    namespace: o.namespace,
    push: pusher(
      ctx,
      o.namespace,
      url,
      peer,
      async (payload) => {
        await deliverGithubPush(o.gatewayUrl + hookPath, o.secret, payload);
      },
      applied,
    ),
    remove: () => peer.remove(),
  };
}

/**
 * Argo CD with applygate: the push goes to applygate's gateway; the branch worker asks the sidecar
 * beside argocd-application-controller to sync the Application, pinned to the commit (the
 * ArgoCDClaim holds its automated sync off).
 */
export async function argoApplygateSetup(
  ctx: SetupContext,
  o: { namespace: string; appName: string; gatewayUrl: string; secret: string },
): Promise<Setup> {
  const { url, peer } = await repository(ctx, o.namespace);
  await createApplication(
    ctx.kc,
    argoApplication({
      name: o.appName,
      repoURL: url,
      path: "apps",
      destinationNamespace: o.namespace,
      syncPolicy: { automated: { prune: true, selfHeal: false } },
    }),
  );
  const applied = applicationApplied(ctx.kc, "argocd", o.appName);
  const first = await ctx.git.tip(o.namespace);
  await until(() => applied(first ?? ""), `${o.appName}: first commit applied`, {
    timeoutMs: 120_000,
    everyMs: 100,
    retryErrors: true,
  });
  // The claim and the GitTarget live beside the Application (no ApplierGrant needed).
  await ctx.kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
    ...APPLYGATE,
    plural: "argocdclaims",
    namespace: "argocd",
    body: {
      apiVersion: `${APPLYGATE.group}/${APPLYGATE.version}`,
      kind: "ArgoCDClaim",
      metadata: { name: o.appName, namespace: "argocd" },
      spec: { applicationRef: { name: o.appName, namespace: "argocd" } },
    },
  });
  const hookPath = await applygateTarget(ctx, {
    namespace: "argocd",
    url,
    secret: o.secret,
    claim: { kind: "ArgoCDClaim", name: o.appName },
  });
  await inControl(ctx, "argocd", "argocdclaims", o.appName);
  return {
    name: "argocd-applygate",
    namespace: o.namespace,
    push: pusher(
      ctx,
      o.namespace,
      url,
      peer,
      async (payload) => {
        await deliverGithubPush(o.gatewayUrl + hookPath, o.secret, payload);
      },
      applied,
    ),
    remove: () => peer.remove(),
  };
}
