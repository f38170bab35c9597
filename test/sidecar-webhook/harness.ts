/**
 * The webhook applier as deployed, for its tests: `startSidecar({applier: "webhook"})` under the
 * ServiceAccount and RBAC manifests/webhook grants (bound to applygate-secret-watcher in the
 * claims' namespace, as docs/install.md says), against the simulated API server with the CRDs
 * enforced, real Redis, and a local HTTP endpoint the test answers as it likes. Attempts are
 * queued as a branch worker queues them; reports are read from the reports queue.
 */
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Queue } from "bullmq";
import {
  type Attempt,
  attemptsQueue,
  type PhaseReport,
  QUEUES,
  type ReportPhase,
} from "../../queue/contract.js";
import { crdFiles } from "../../queue/crds/files.js";
import { API_VERSION } from "../../queue/crds/index.js";
import { type KObject, Kube, RESOURCES } from "../../queue/kube/index.js";
import { silentLogger } from "../../queue/log.js";
import { bullConnection } from "../../queue/redis.js";
import { type Sidecar, startSidecar } from "../../sidecar/main.js";
import type { Operation } from "../../sidecar/operation-record.js";
import type { WebhookKindOptions } from "../../sidecar/webhook/index.js";
import { type ApiServer, startApiServer } from "../cluster/apiserver/index.js";
import { secretReaderYaml } from "../playground/demo.js";
import { deployedIdentities } from "../playground/identities.js";
import { type IsolatedRedis, isolatedRedis } from "../redis/isolated.js";
import { untilWith } from "../support/wait.js";

export const until = untilWith({ timeoutMs: 15_000, everyMs: 15, retryErrors: true });
export const NS = "team-a";
export const COMMIT = "c".repeat(40);

export interface Received {
  path: string;
  headers: IncomingMessage["headers"];
  raw: Buffer;
  body: Record<string, unknown>;
}

export type Handler = (req: Received, res: ServerResponse) => void;

export interface Endpoint {
  url: string;
  received: Received[];
  /** How the next requests are answered (default: 200 "applied"). */
  handle(h: Handler): void;
  close(): Promise<void>;
}

export async function startEndpoint(): Promise<Endpoint> {
  const received: Received[] = [];
  let handler: Handler = (_r, res) => res.end("applied");
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const raw = Buffer.concat(chunks);
      let body: Record<string, unknown> = {};
      try {
        body = JSON.parse(raw.toString("utf8"));
      } catch {}
      const r = { path: req.url ?? "", headers: req.headers, raw, body };
      received.push(r);
      handler(r, res);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    handle: (h) => {
      handler = h;
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

export interface ClaimSpec {
  url: string;
  signature?: "generic-hmac" | "github";
  mode?: "response" | "callback";
  timeoutSeconds?: number;
  budgetSeconds?: number;
}

export interface WebhookWorld {
  api: ApiServer;
  kube: Kube;
  redis: IsolatedRedis;
  endpoint: Endpoint;
  sidecar: Sidecar;
  /** Starts the webhook applier again (after `sidecar.stop()`), with other options if given. */
  restart(options?: WebhookKindOptions): Promise<Sidecar>;
  /** Creates the key Secret, the claim, a GitProvider and a GitTarget naming the claim; waits until it is in control. */
  createClaim(name: string, spec: ClaimSpec, key?: string): Promise<void>;
  setKey(name: string, key: string): Promise<void>;
  /** Queues an attempt for the claim as a branch worker does; returns it. */
  send(claim: string, token?: string, commit?: string): Promise<Attempt>;
  reports(token: string): Promise<PhaseReport[]>;
  phases(token: string): Promise<ReportPhase[]>;
  operation(claim: string): Promise<Operation | undefined>;
  claim(claim: string): Promise<KObject | undefined>;
  close(): Promise<void>;
}

export async function startWebhookWorld(options: WebhookKindOptions = {}): Promise<WebhookWorld> {
  const api = await startApiServer({ bookmarkIntervalMs: 50 });
  for (const f of crdFiles()) await api.installCrdFile(f);
  const deployed = deployedIdentities();
  const sa = deployed.serviceAccounts.webhook;
  await api.applyYaml(
    [NS, sa.namespace]
      .map((name) => JSON.stringify({ apiVersion: "v1", kind: "Namespace", metadata: { name } }))
      .join("\n---\n"),
  );
  await api.applyYaml(deployed.rbac.map((o) => JSON.stringify(o)).join("\n---\n"));
  // The per-namespace opt-in for the key Secrets (docs/install.md).
  await api.applyYaml(secretReaderYaml(NS, [sa], "applygate-secret-watcher"));
  const identity = api.kubeConfig(api.addServiceAccount(sa.namespace, sa.name));
  const kube = new Kube(api.kubeConfig());
  const redis = await isolatedRedis("webhook");
  const endpoint = await startEndpoint();
  const attempts = new Queue(attemptsQueue("webhook"), {
    connection: bullConnection(redis.url),
    prefix: redis.prefix,
  });
  const reportsQueue = new Queue(QUEUES.reports, {
    connection: bullConnection(redis.url),
    prefix: redis.prefix,
  });
  const start = (o: WebhookKindOptions) =>
    startSidecar({
      applier: "webhook",
      kubeConfig: identity,
      redisUrl: redis.url,
      redisPrefix: redis.prefix,
      log: silentLogger(),
      resyncMs: 60_000,
      options: { allowInternal: true, pollMs: 20, maxPollMs: 100, ...o },
    });
  const targetUids = new Map<string, string>();
  const w: WebhookWorld = {
    api,
    kube,
    redis,
    endpoint,
    sidecar: await start(options),
    async restart(o = options) {
      w.sidecar = await start(o);
      return w.sidecar;
    },
    async setKey(name, key) {
      const body = {
        apiVersion: "v1",
        kind: "Secret",
        metadata: { name: `${name}-key`, namespace: NS },
        data: { hmacKey: Buffer.from(key).toString("base64") },
      };
      // Created, or replaced whole as a rotation does.
      const found = await kube.core
        .readNamespacedSecret({ name: `${name}-key`, namespace: NS })
        .catch(() => undefined);
      if (found) await kube.core.replaceNamespacedSecret({ name: `${name}-key`, namespace: NS, body });
      else await kube.core.createNamespacedSecret({ namespace: NS, body });
    },
    async createClaim(name, spec, key = "s3cret") {
      await w.setKey(name, key);
      const claim = {
        apiVersion: API_VERSION,
        kind: "WebhookClaim",
        metadata: { name, namespace: NS },
        spec: {
          url: spec.url,
          ...(spec.url.startsWith("http:") ? { insecure: true } : {}),
          secretRef: { name: `${name}-key` },
          signature: spec.signature ?? "generic-hmac",
          timeoutSeconds: spec.timeoutSeconds ?? 5,
          completion: { mode: spec.mode ?? "response", budgetSeconds: spec.budgetSeconds ?? 300 },
          fieldManagers: ["playground-deployer"],
        },
      };
      await api.applyYaml(`${JSON.stringify(claim)}
---
apiVersion: v1
kind: Secret
metadata: {name: hook, namespace: ${NS}}
stringData: {token: t}
---
apiVersion: ${API_VERSION}
kind: GitProvider
metadata: {name: repo, namespace: ${NS}}
spec: {url: "https://git.example/org/repo.git", type: github, webhookSecretRef: {name: hook}}
---
apiVersion: ${API_VERSION}
kind: GitTarget
metadata: {name: ${name}-target, namespace: ${NS}}
spec: {providerRef: {name: repo}, branch: main, path: apps/webhook, claimRef: {kind: WebhookClaim, name: ${name}}}
`);
      const t = await kube.get<KObject>(RESOURCES.gitTarget, NS, `${name}-target`);
      targetUids.set(name, t!.metadata.uid!);
      await until(async () => {
        const c = await w.claim(name);
        const conds = (c?.status as { conditions?: { type: string; status: string }[] } | undefined)
          ?.conditions;
        return conds?.some((x) => x.type === "InControl" && x.status === "True");
      }, `WebhookClaim ${name} in control`);
    },
    async send(claim, token = `op-${randomBytes(4).toString("hex")}`, commit = COMMIT) {
      // As the branch worker does: a claim's next attempt only once its last one ended.
      await until(() => w.sidecar.following.forClaim(`${NS}/${claim}`) === undefined, `${claim} free`);
      const attempt: Attempt = {
        token,
        claim: { kind: "WebhookClaim", namespace: NS, name: claim },
        applier: { kind: "webhook", namespace: NS, name: claim },
        branchKey: "git.example/org/repo@main",
        repository: "https://git.example/org/repo.git",
        branch: "main",
        commit,
        targets: [{ uid: targetUids.get(claim)!, namespace: NS, name: `${claim}-target`, reason: "CatchUp" }],
        sentAt: new Date().toISOString(),
      };
      await attempts.add("attempt", attempt, { jobId: token });
      return attempt;
    },
    async reports(token) {
      const jobs = await reportsQueue.getJobs(["waiting", "active", "completed", "delayed"]);
      return jobs
        .sort((a, b) => Number(a.id) - Number(b.id))
        .map((j) => j.data as PhaseReport)
        .filter((r) => r.type === "phase" && r.token === token);
    },
    async phases(token) {
      return (await w.reports(token)).map((r) => r.phase);
    },
    async claim(name) {
      return kube.get<KObject>(RESOURCES.webhookClaim, NS, name);
    },
    async operation(name) {
      return ((await w.claim(name))?.status as { operation?: Operation } | undefined)?.operation;
    },
    async close() {
      await w.sidecar.stop();
      await attempts.close();
      await reportsQueue.close();
      await endpoint.close();
      await kube.close();
      await api.close();
      await redis.cleanup();
    },
  };
  return w;
}
