// Push → applied on the real components: one setup per way a Git push reaches an applier. Each
// push commits to our Git smart-HTTP server (test/git/server.ts), then delivers the same signed
// GitHub push event to the setup's receiver, and times from the delivery until the applier reports
// the new commit applied: a Kustomization's status.lastAppliedRevision `main@sha1:<sha>`, an
// Application's finished operation `Succeeded` at <sha> with sync status at <sha>.
//
// Shared by test/real/receivers.real.test.ts (a few pushes, proving each setup applies what was
// pushed) and test/bench/receivers.ts (the figures).
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from "@kubernetes/client-node";
import { GitPeer } from "../git/peer.js";
import type { GitServer } from "../git/server.js";
import { until } from "../support/wait.js";
import { argoApplication, createApplication } from "./argocd.js";
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

/** An Application's revision when its last operation succeeded at `sha` and it is synced at `sha`. */
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
    return op?.phase === "Succeeded" && op.syncResult?.revision === sha && app.status?.sync?.revision === sha
      ? sha
      : undefined;
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
