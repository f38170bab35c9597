// The push receivers people use today, on the real components, beside applygate: each setup of
// test/real/push-to-applied.ts applies what a signed GitHub push announced (its commit on the
// applier's status, its value in the cluster), so the bench of the same setups
// (test/bench/receivers.ts) cannot measure nothing.
import { CustomObjectsApi } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type EmbeddedRedis, resolveEmbeddedRedis } from "../../queue/redis.js";
import { type GitServer, startGitServer } from "../git/server.js";
import { ensureRedisServer } from "../redis/install.js";
import { until } from "../support/wait.js";
import { findRealBinaries, RECEIVERS_BINARIES } from "./binaries.js";
import { type RealCluster, startRealCluster } from "./cluster.js";
import { GIT_REPOSITORIES } from "./flux.js";
import {
  argoApplygateSetup,
  argoWebhookSetup,
  fluxApplygateSetup,
  fluxReceiverSetup,
  type Setup,
  startReceiverComponents,
} from "./push-to-applied.js";
import { createGithubReceiver } from "./receivers.js";

const bins = findRealBinaries(RECEIVERS_BINARIES);
if (!bins.built) console.warn(`\n!!! SKIPPED test/real/receivers.real.test.ts: ${bins.message}\n`);

type Components = Awaited<ReturnType<typeof startReceiverComponents>>;

const PUSHES = 3;
const SECRET = "receivers-test-secret";

describe.skipIf(!bins.built)("push → applied through each receiver, on the real components", () => {
  let cluster: RealCluster;
  let git: GitServer;
  let redis: EmbeddedRedis;
  let nc: Components["nc"];
  let server: Components["server"];
  let applygate: Components["applygate"];
  let stopComponents: Components["stop"] | undefined;

  beforeAll(async () => {
    cluster = await startRealCluster();
    git = await startGitServer();
    redis = await resolveEmbeddedRedis(process.env, { ensureServer: ensureRedisServer });
    const components = await startReceiverComponents(cluster, { redisUrl: redis.url, secret: SECRET });
    ({ nc, server, applygate } = components);
    stopComponents = components.stop;
  }, 420_000);
  afterAll(async () => {
    await stopComponents?.();
    await cluster?.stop();
    await git?.close();
    await redis?.stop();
  }, 120_000);

  /** PUSHES pushes, each applied with its commit and its value. */
  async function provesEachPush(setup: Setup): Promise<string> {
    let last = "";
    try {
      for (let i = 1; i <= PUSHES; i++) {
        const t = await setup.push(String(i), 60_000);
        expect(t.value).toBe(String(i));
        expect(t.appliedRevision).toContain(t.sha);
        expect(t.ms).toBeGreaterThan(0);
        last = t.sha;
      }
    } finally {
      await setup.remove();
    }
    return last;
  }

  it("plain Flux + its Receiver (type github, HMAC) applies each pushed commit", async () => {
    const kc = cluster.kubeConfig();
    const setup = await fluxReceiverSetup(
      { kc, git },
      {
        namespace: "flux-receiver",
        receiverUrl: nc.receiverUrl,
        secret: SECRET,
        createReceiver: (namespace) =>
          createGithubReceiver(kc, { namespace, gitRepository: "apps", secret: SECRET }),
      },
    );
    await provesEachPush(setup);
  }, 240_000);

  it("a Receiver refuses a push signed with another secret and asks for no fetch", async () => {
    const kc = cluster.kubeConfig();
    const namespace = "flux-receiver-forged";
    const setup = await fluxReceiverSetup(
      { kc, git },
      {
        namespace,
        receiverUrl: nc.receiverUrl,
        secret: "not-the-receivers-secret",
        createReceiver: (ns) =>
          createGithubReceiver(kc, { namespace: ns, gitRepository: "apps", secret: SECRET }),
      },
    );
    await expect(setup.push("1", 5_000)).rejects.toThrow(/answered 4\d\d/);
    await setup.remove();
    // Nobody asked source-controller to fetch.
    const repo = (await kc.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
      ...GIT_REPOSITORIES,
      namespace,
      name: "apps",
    })) as { metadata: { annotations?: Record<string, string> } };
    expect(repo.metadata.annotations?.["reconcile.fluxcd.io/requestedAt"]).toBeUndefined();
  }, 240_000);

  it("plain Argo CD + argocd-server's /api/webhook applies each pushed commit", async () => {
    const setup = await argoWebhookSetup(
      { kc: cluster.kubeConfig(), git },
      { namespace: "argo-webhook", appName: "argo-webhook", webhookUrl: server.webhookUrl, secret: SECRET },
    );
    await provesEachPush(setup);
  }, 240_000);

  it("Flux + applygate (gateway, worker, the sidecar holding the Kustomization) applies each pushed commit", async () => {
    const setup = await fluxApplygateSetup(
      { kc: cluster.kubeConfig(), git },
      { namespace: "flux-applygate", gatewayUrl: applygate.gatewayUrl, secret: SECRET },
    );
    await provesEachPush(setup);
  }, 240_000);

  it("Argo CD + applygate (gateway, worker, the sidecar holding automated sync off) applies each pushed commit", async () => {
    const setup = await argoApplygateSetup(
      { kc: cluster.kubeConfig(), git },
      {
        namespace: "argocd-applygate",
        appName: "argocd-applygate",
        gatewayUrl: applygate.gatewayUrl,
        secret: SECRET,
      },
    );
    const last = await provesEachPush(setup);
    // Argo CD's own view agrees: Synced at the pushed commit (the sidecar asks for a refresh once
    // its sync ended; without it the branch's earlier resolution stayed, OutOfSync, for minutes).
    const custom = cluster.kubeConfig().makeApiClient(CustomObjectsApi);
    await until(
      async () => {
        const app = (await custom.getNamespacedCustomObject({
          group: "argoproj.io",
          version: "v1alpha1",
          plural: "applications",
          namespace: "argocd",
          name: "argocd-applygate",
        })) as { status?: { sync?: { status?: string; revision?: string } } };
        return app.status?.sync?.status === "Synced" && app.status.sync.revision === last;
      },
      "argocd-applygate Synced at the pushed commit",
      { timeoutMs: 30_000, everyMs: 100 },
    );
  }, 240_000);
});
