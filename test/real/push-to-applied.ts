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
import { GitPeer } from "../git/peer.js";
import type { GitServer } from "../git/server.js";
import { until } from "../support/wait.js";
import {
  deleteInstallKeys,
  installApplygate,
  type Running,
  startComponent,
  startSidecar,
} from "./applygate.js";
import { argoApplication, createApplication, type RealArgoCD, startRealArgoCD } from "./argocd.js";
import type { RealCluster } from "./cluster.js";
import { createGitSource, KUSTOMIZATIONS, type RealFlux, startRealFlux } from "./flux.js";
import {
  type ArgoCDServer,
  deliverGithubPush,
  githubPush,
  type NotificationController,
  startArgoCDServer,
  startNotificationController,
} from "./receivers.js";

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
  /** Where the last push went and what it carried (for delivering the same push again). */
  lastDelivery(): { url: string; secret: string; payload: Record<string, unknown> } | undefined;
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

/** Waits until the applier applied the repository's first commit. */
async function firstApplied(
  ctx: SetupContext,
  namespace: string,
  applied: (sha: string) => Promise<string | undefined>,
  label: string,
) {
  const first = await ctx.git.tip(namespace);
  await until(() => applied(first ?? ""), `${label}: first commit applied`, {
    timeoutMs: 120_000,
    everyMs: 100,
    retryErrors: true,
  });
}

/** The namespace's repository, applied by GitRepository and Kustomization `apps` there. */
async function fluxSource(ctx: SetupContext, namespace: string) {
  const { url, peer } = await repository(ctx, namespace);
  await createGitSource(ctx.kc, { namespace, url, path: "./apps", targetNamespace: namespace });
  const applied = kustomizationApplied(ctx.kc, namespace);
  await firstApplied(ctx, namespace, applied, namespace);
  return { url, peer, applied };
}

/** The namespace's repository, synced by Application `appName` in argocd, automated sync on. */
async function argoSource(ctx: SetupContext, namespace: string, appName: string) {
  const { url, peer } = await repository(ctx, namespace);
  await createApplication(
    ctx.kc,
    argoApplication({
      name: appName,
      repoURL: url,
      path: "apps",
      destinationNamespace: namespace,
      syncPolicy: { automated: { prune: true, selfHeal: false } },
    }),
  );
  const applied = applicationApplied(ctx.kc, "argocd", appName);
  await firstApplied(ctx, namespace, applied, appName);
  return { url, peer, applied };
}

/** A setup whose pushes are delivered, signed with `secret`, to `hookUrl`. */
function setup(
  ctx: SetupContext,
  name: string,
  namespace: string,
  source: Awaited<ReturnType<typeof fluxSource>>,
  hookUrl: string,
  secret: string,
): Setup {
  let last: Record<string, unknown> | undefined;
  const deliver = async (payload: Record<string, unknown>) => {
    last = payload;
    await deliverGithubPush(hookUrl, secret, payload);
  };
  return {
    name,
    namespace,
    push: pusher(ctx, namespace, source.url, source.peer, deliver, source.applied),
    lastDelivery: () => (last ? { url: hookUrl, secret, payload: last } : undefined),
    remove: () => source.peer.remove(),
  };
}

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
  const source = await fluxSource(ctx, o.namespace);
  const hookPath = await o.createReceiver(o.namespace);
  return setup(ctx, "flux-receiver", o.namespace, source, o.receiverUrl + hookPath, o.secret);
}

/**
 * Plain Argo CD with its own webhook: the push goes to argocd-server's /api/webhook, which
 * refreshes the Applications of that repository and branch; automated sync applies the new commit.
 */
export async function argoWebhookSetup(
  ctx: SetupContext,
  o: { namespace: string; appName: string; webhookUrl: string; secret: string },
): Promise<Setup> {
  const source = await argoSource(ctx, o.namespace, o.appName);
  return setup(ctx, "argocd-webhook", o.namespace, source, o.webhookUrl, o.secret);
}

// ---- through applygate -------------------------------------------------------------------------

const APPLYGATE = { group: "applygate.dev", version: "v1alpha1" };

/** Creates applygate's object `kind` `namespace/name` (its plural: the kind's name, lower case, with an s). */
const createObject = (
  ctx: SetupContext,
  kind: string,
  metadata: { namespace: string; name: string },
  spec: Record<string, unknown>,
) =>
  ctx.kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
    ...APPLYGATE,
    plural: `${kind.toLowerCase()}s`,
    namespace: metadata.namespace,
    body: { apiVersion: `${APPLYGATE.group}/${APPLYGATE.version}`, kind, metadata, spec },
  });

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
    await deleteInstallKeys(installed);
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
  const metadata = (name: string) => ({ name, namespace: o.namespace });
  await createObject(ctx, "GitProvider", metadata("repo"), {
    url: o.url,
    type: "github",
    webhookSecretRef: { name: "push-secret" },
  });
  await createObject(ctx, "GitTarget", metadata("apps"), {
    providerRef: { name: "repo" },
    branch: "main",
    path: "apps",
    claimRef: o.claim,
  });
  const custom = ctx.kc.makeApiClient(CustomObjectsApi);
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
 * A claim of `kind` named after its applier, beside it in `namespace`, holding it, and the
 * GitTarget naming the claim (no ApplierGrant needed); pushes go to applygate's gateway.
 */
async function heldSetup(
  ctx: SetupContext,
  name: string,
  o: { namespace: string; gatewayUrl: string; secret: string },
  source: Awaited<ReturnType<typeof fluxSource>>,
  kind: "FluxClaim" | "ArgoCDClaim",
  claim: { namespace: string; name: string },
): Promise<Setup> {
  const ref = kind === "FluxClaim" ? "kustomizationRef" : "applicationRef";
  await createObject(ctx, kind, claim, { [ref]: claim });
  const hookPath = await applygateTarget(ctx, {
    namespace: claim.namespace,
    url: source.url,
    secret: o.secret,
    claim: { kind, name: claim.name },
  });
  await inControl(ctx, claim.namespace, `${kind.toLowerCase()}s`, claim.name);
  return setup(ctx, name, o.namespace, source, o.gatewayUrl + hookPath, o.secret);
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
  const source = await fluxSource(ctx, o.namespace);
  return heldSetup(ctx, "flux-applygate", o, source, "FluxClaim", { namespace: o.namespace, name: "apps" });
}

/**
 * Argo CD with applygate: the push goes to applygate's gateway; the branch worker asks the sidecar
 * beside argocd-application-controller to sync the Application, pinned to the commit (the
 * ArgoCDClaim, in argocd, holds its automated sync off).
 */
export async function argoApplygateSetup(
  ctx: SetupContext,
  o: { namespace: string; appName: string; gatewayUrl: string; secret: string },
): Promise<Setup> {
  const source = await argoSource(ctx, o.namespace, o.appName);
  return heldSetup(ctx, "argocd-applygate", o, source, "ArgoCDClaim", {
    namespace: "argocd",
    name: o.appName,
  });
}

// ---- every component, on one cluster ------------------------------------------------------------

/**
 * Every component the four setups need: applygate first (its install makes flux-system and argocd
 * with the Secret its sidecars read), real Flux and notification-controller, real Argo CD with no
 * timed refresh (only a push makes the controller look at Git) and argocd-server taking GitHub
 * pushes signed with `secret`, then applygate's sidecars. What started is stopped when a start
 * fails, and by `stop`.
 */
export async function startReceiverComponents(
  cluster: RealCluster,
  o: { redisUrl: string; secret: string; quiet?: boolean },
) {
  const quiet = Boolean(o.quiet);
  let applygate: Awaited<ReturnType<typeof startApplygate>> | undefined;
  let flux: RealFlux | undefined;
  let nc: NotificationController | undefined;
  let argocd: RealArgoCD | undefined;
  let server: ArgoCDServer | undefined;
  const stop = async () => {
    await applygate?.stop();
    await server?.stop();
    await argocd?.stop();
    await nc?.stop();
    await flux?.stop();
  };
  try {
    applygate = await startApplygate(cluster, o.redisUrl);
    flux = await startRealFlux(cluster, { quiet });
    nc = await startNotificationController(cluster, { quiet });
    argocd = await startRealArgoCD(cluster, { appResyncSeconds: 0, quiet });
    server = await startArgoCDServer(cluster, argocd, { githubSecret: o.secret, quiet });
    await applygate.startSidecars();
    return { applygate, flux, nc, argocd, server, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
