/**
 * Seed 002 end to end: a sidecar started through startSidecar, given no ancestry function and no
 * clone, proves from its own clone (fetched through the claim's GitTarget and GitProvider) that
 * our running operation is stale, terminates it, and syncs the newer commit.
 */
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as k8s from "@kubernetes/client-node";
import { Queue } from "bullmq";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type Attempt, attemptsQueue } from "../../queue/contract.js";
import { API_VERSION } from "../../queue/crds/index.js";
import { RESOURCES } from "../../queue/kube/index.js";
import { APPLICATION } from "../../sidecar/argocd/application.js";
import { buildSyncOperation, startSyncUpdate } from "../../sidecar/argocd/sync.js";
import { type Sidecar, startSidecar } from "../../sidecar/main.js";
import { isolatedRedis } from "../redis/isolated.js";
import { type Cluster, cm, startCluster, until } from "./harness.js";

let c: Cluster;
let redis: Awaited<ReturnType<typeof isolatedRedis>>;
let sidecar: Sidecar;
let queue: Queue;
let cacheDir: string;

beforeAll(async () => {
  c = await startCluster();
  await c.startArgo();
  redis = await isolatedRedis("argocd-stale");
  cacheDir = await mkdtemp(join(tmpdir(), "sidecar-cache-"));
  sidecar = await startSidecar({
    applier: "argocd",
    kubeConfig: c.kc,
    redisUrl: redis.url,
    redisPrefix: redis.prefix,
    log: c.log,
    resyncMs: 200,
    cacheDir,
    options: { pollMs: 20, busyWaitMs: 10_000, budgetMs: 10_000, maxPollMs: 100, watchKinds: [] },
  });
  queue = new Queue(attemptsQueue("argocd"), { connection: { url: redis.url }, prefix: redis.prefix });
});
afterAll(async () => {
  await queue?.close();
  await sidecar?.stop();
  await redis?.cleanup();
  await c?.close();
  if (cacheDir) await rm(cacheDir, { recursive: true, force: true });
});

it("terminates our running operation for a proven ancestor and syncs the newer commit", async () => {
  const repo = await c.repo();
  const name = "web";
  const ns = await c.namespace("ns-web");
  await c.createApp(name, repo, {
    destination: { server: "https://kubernetes.default.svc", namespace: ns },
    syncPolicy: { automated: { enabled: false, prune: true } },
  });
  await c.api.applyYaml(`
apiVersion: ${API_VERSION}
kind: GitProvider
metadata: {name: repo, namespace: argocd}
spec: {url: "${repo.url}", type: gitea, webhookSecretRef: {name: hook}}
---
apiVersion: ${API_VERSION}
kind: GitTarget
metadata: {name: web, namespace: argocd}
spec: {providerRef: {name: repo}, branch: main, path: deploy, claimRef: {kind: ArgoCDClaim, name: web}}
`);
  await c.createClaim(name, name);
  await until(async () => {
    const claim = await c.kube.get<{ status?: { conditions?: { type: string; status: string }[] } }>(
      RESOURCES.argoCDClaim,
      "argocd",
      name,
    );
    return claim?.status?.conditions?.some((x) => x.type === "InControl" && x.status === "True");
  }, "claim in control");
  // Pushed after the sidecar started, so its clone can only learn them by fetching.
  const [c1, c2] = (await repo.pushAll([
    ["cm.yaml", cm("settings", "v1")],
    ["cm.yaml", cm("settings", "v2")],
  ])) as [string, string];

  // Our earlier sync of c1, held Running by Argo CD.
  const ref = { namespace: "argocd", name };
  const hold = c.argo!.holdSync(ref);
  const app = await c.getApp(name);
  await c.kube.replace(
    APPLICATION,
    startSyncUpdate(app, buildSyncOperation(app, { commit: c1, token: "old" })),
  );
  await until(
    async () => (await c.getApp(name)).status?.operationState?.phase === "Running",
    "old sync running",
  );

  const attempt: Attempt = {
    ...c.attempt(name, name, c2, "new"),
    branchKey: `${repo.url}@main`,
    repository: repo.url,
  };
  await queue.add("attempt", attempt, { attempts: 1 });

  await until(
    async () => c.argo!.syncs(ref).some((s) => s.token === "new" && s.revision === c2),
    "the newer commit synced",
  );
  expect(c.argo!.syncs(ref).map((s) => s.token)).not.toContain("old");
  const events = await c.kc.makeApiClient(k8s.EventsV1Api).listNamespacedEvent({ namespace: "argocd" });
  expect(events.items.filter((e) => e.reason === "StaleOperationTerminated").map((e) => e.note)).toEqual([
    `terminated applygate operation old for ${c1}, an ancestor of ${c2}`,
  ]);
  // The proof came from the sidecar's own clone under its cache folder.
  expect((await readdir(cacheDir)).length).toBe(1);
  hold.release();
});
