/**
 * The webhook applier as deployed, for its tests: the sidecar world (test/support/sidecar-world.ts)
 * running `startSidecar({applier: "webhook"})` under the ServiceAccount and RBAC manifests/webhook
 * grants (bound to applygate-secret-watcher in the claims' namespace, as docs/install.md says),
 * and a local HTTP endpoint the test answers as it likes. Attempts are queued as a branch worker
 * queues them; reports are read from the reports queue.
 */
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Attempt } from "../../queue/contract.js";
import { API_VERSION } from "../../queue/crds/index.js";
import { type KObject, RESOURCES } from "../../queue/kube/index.js";
import type { Sidecar } from "../../sidecar/main.js";
import { type Operation, type OperationPhase, operationOf } from "../../sidecar/operation-record.js";
import type { WebhookKindOptions } from "../../sidecar/webhook/index.js";
import { secretReaderYaml } from "../playground/demo.js";
import { deployedIdentities } from "../playground/identities.js";
import {
  attemptFor,
  createProvider,
  createTarget,
  inControl,
  type SidecarWorld,
  startSidecarWorld,
  until,
} from "../support/sidecar-world.js";

export { until };
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

export interface WebhookWorld extends SidecarWorld {
  endpoint: Endpoint;
  sidecar: Sidecar;
  /** Starts the webhook applier again (after `sidecar.stop()`), with other options if given. */
  restart(options?: WebhookKindOptions): Promise<Sidecar>;
  /** Creates the key Secret, the claim, a GitProvider and a GitTarget naming the claim; waits until it is in control. */
  createClaim(name: string, spec: ClaimSpec, key?: string): Promise<void>;
  setKey(name: string, key: string): Promise<void>;
  /** Queues an attempt for the claim as a branch worker does; returns it. */
  send(claim: string, token?: string, commit?: string): Promise<Attempt>;
  operation(claim: string): Promise<Operation | undefined>;
  /** Waits until the claim's operation (the one of `token`, when given) is in `phase` (one of them); answers it. */
  reaches(claim: string, phase: OperationPhase | OperationPhase[], token?: string): Promise<Operation>;
  claim(claim: string): Promise<KObject | undefined>;
}

export async function startWebhookWorld(options: WebhookKindOptions = {}): Promise<WebhookWorld> {
  const deployed = deployedIdentities();
  const sa = deployed.serviceAccounts.webhook;
  const base = await startSidecarWorld({ namespaces: [...new Set([NS, sa.namespace])], label: "webhook" });
  const { api, kube } = base;
  await api.applyYaml(deployed.rbac.map((o) => JSON.stringify(o)).join("\n---\n"));
  // The per-namespace opt-in for the key Secrets (docs/install.md).
  await api.applyYaml(secretReaderYaml(NS, [sa], "applygate-secret-watcher"));
  const identity = api.kubeConfig(api.addServiceAccount(sa.namespace, sa.name));
  const endpoint = await startEndpoint();
  base.onStop(() => endpoint.close());
  const start = (o: WebhookKindOptions) =>
    base.startSidecar({
      applier: "webhook",
      kubeConfig: identity,
      resyncMs: 60_000,
      options: { allowInternal: true, pollMs: 20, maxPollMs: 100, ...o },
    });
  const targetUids = new Map<string, string>();
  const w: WebhookWorld = Object.assign(base, {
    endpoint,
    sidecar: await start(options),
    async restart(o: WebhookKindOptions = options) {
      w.sidecar = await start(o);
      return w.sidecar;
    },
    async setKey(name: string, key: string) {
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
    async createClaim(name: string, spec: ClaimSpec, key = "s3cret") {
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
`);
      await createProvider(kube, NS, "https://git.example/org/repo.git", "github");
      const uid = await createTarget(kube, {
        namespace: NS,
        name: `${name}-target`,
        path: "apps/webhook",
        claim: { kind: "WebhookClaim", name },
      });
      targetUids.set(name, uid);
      await inControl(kube, RESOURCES.webhookClaim, { namespace: NS, name });
    },
    async send(claim: string, token = `op-${randomBytes(4).toString("hex")}`, commit = COMMIT) {
      // As the branch worker does: a claim's next attempt only once its last one ended.
      await until(() => w.sidecar.following.forClaim(`${NS}/${claim}`) === undefined, `${claim} free`);
      return base.queues.send(
        attemptFor({
          token,
          claim: { kind: "WebhookClaim", namespace: NS, name: claim },
          applier: { kind: "webhook", namespace: NS, name: claim },
          branchKey: "git.example/org/repo@main",
          repository: "https://git.example/org/repo.git",
          commit,
          targets: [
            { uid: targetUids.get(claim)!, namespace: NS, name: `${claim}-target`, reason: "CatchUp" },
          ],
        }),
      );
    },
    claim: (name: string) => kube.get<KObject>(RESOURCES.webhookClaim, NS, name),
    operation: async (name: string) => operationOf(await w.claim(name)),
    reaches(name: string, phase: OperationPhase | OperationPhase[], token?: string) {
      const phases = [phase].flat();
      return until(
        async () => {
          const op = await w.operation(name);
          return op && (token === undefined || op.token === token) && phases.includes(op.phase) && op;
        },
        `the operation${token ? ` ${token}` : ""} of ${name} ${phases.join(" or ")}`,
      );
    },
  });
  return w;
}
