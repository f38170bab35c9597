import { createServer, type Server, Socket } from "node:net";
import { Queue } from "bullmq";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Attempt, attemptsQueue } from "../queue/contract.js";
import { crdFiles } from "../queue/crds/files.js";
import { RESOURCES } from "../queue/kube/index.js";
import { silentLogger } from "../queue/log.js";
import { type ApiServer, startApiServer } from "../test/cluster/apiserver/index.js";
import { isolatedRedis } from "../test/redis/isolated.js";
import { makeAttempt } from "../test/support/attempts.js";
import { untilWith } from "../test/support/wait.js";
import type { ApplierKindModule, ClaimController, ExternalCheck } from "./applier-kind.js";
import { readiness } from "./http.js";
import { type SidecarOptions, startSidecar } from "./main.js";
import { createSidecarMetrics } from "./metrics.js";

/** Value of the series `name` whose labels are exactly `labels`; undefined when absent. */
/** A claim's labels on applygate_claim_ready (not `namespace`: Prometheus sets that at scrape). */
const series = (c: { kind: string; namespace: string; name: string }) => ({
  kind: c.kind,
  claim_namespace: c.namespace,
  name: c.name,
});

function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split("\n")) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const found = Object.fromEntries(
      [...(m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]),
    );
    if (JSON.stringify(Object.entries(found).sort()) === JSON.stringify(Object.entries(labels).sort()))
      return Number(m[3]);
  }
  return undefined;
}

describe("sidecar metrics", () => {
  it("counts an operation Unresolved until it reports another phase or is no longer followed", async () => {
    const m = createSidecarMetrics({ kinds: ["flux"] });
    const unresolved = async () =>
      sample(await m.text(), "applygate_operations_unresolved", { applier_kind: "flux" });
    expect(await unresolved()).toBe(0);
    m.attempt("flux");
    m.phase("flux", "a", "Running");
    m.phase("flux", "a", "Unresolved");
    m.phase("flux", "a", "Unresolved"); // reported twice, counted once
    m.phase("flux", "b", "Unresolved");
    expect(await unresolved()).toBe(2);
    m.phase("flux", "a", "Succeeded");
    expect(await unresolved()).toBe(1);
    m.forget("flux", "b"); // stopped following it (graceful stop): not ours to count any more
    expect(await unresolved()).toBe(0);
    m.forget("flux", "a"); // forgetting a settled one changes nothing
    expect(await unresolved()).toBe(0);
    const text = await m.text();
    expect(sample(text, "applygate_sidecar_attempts_total", { applier_kind: "flux" })).toBe(1);
    expect(
      sample(text, "applygate_sidecar_operations_total", { applier_kind: "flux", phase: "Succeeded" }),
    ).toBe(1);
    // Only terminal phases are counted as ended.
    expect(
      sample(text, "applygate_sidecar_operations_total", { applier_kind: "flux", phase: "Unresolved" }),
    ).toBeUndefined();
  });

  it("sets a claim's Ready series from its condition and removes it once the claim is gone", async () => {
    const m = createSidecarMetrics();
    const web = { kind: "FluxClaim", namespace: "apps", name: "web" };
    const api = { kind: "FluxClaim", namespace: "apps", name: "api" };
    m.claimReady(web, "True");
    m.claimReady(api, "Unknown");
    let text = await m.text();
    expect(sample(text, "applygate_claim_ready", series(web))).toBe(1);
    expect(sample(text, "applygate_claim_ready", series(api))).toBe(0);
    m.claimReady(web, "False");
    m.claimsPresent("FluxClaim", [web]);
    text = await m.text();
    expect(sample(text, "applygate_claim_ready", series(web))).toBe(0);
    expect(sample(text, "applygate_claim_ready", series(api))).toBeUndefined();
    // Claims of another kind are not this sweep's to remove.
    m.claimReady({ ...web, kind: "ArgoCDClaim" }, "True");
    m.claimsPresent("FluxClaim", []);
    expect(sample(await m.text(), "applygate_claim_ready", series({ ...web, kind: "ArgoCDClaim" }))).toBe(1);
  });

  it("process metrics only when asked", async () => {
    expect(await createSidecarMetrics().text()).not.toContain("process_cpu_seconds_total");
    expect(await createSidecarMetrics({ processMetrics: true }).text()).toContain(
      "process_cpu_seconds_total",
    );
  });

  it("is ready only when Redis answers and the claim watch has synced, and says which is missing", () => {
    expect(readiness({ redis: true, claimsSynced: true }).ready).toBe(true);
    const r = readiness({ redis: false, claimsSynced: true });
    expect(r.ready).toBe(false);
    expect(r.body).toContain("redis: not answering");
    expect(readiness({ redis: true, claimsSynced: false })).toEqual({
      ready: false,
      body: "redis: ok\nclaims: not synced yet\nwatches: synced\n",
    });
    expect(readiness({ redis: true, claimsSynced: true, unsyncedWatches: ["/api/v1/secrets"] })).toEqual({
      ready: false,
      body: "redis: ok\nclaims: synced\nwatches: not synced: /api/v1/secrets\n",
    });
  });
});

const REPO = "https://git.example/org/repo";

const until = untilWith({ timeoutMs: 10_000, everyMs: 20, retryErrors: true });

/** A kind whose claims are held at once; its executor reports what the test tells it to. */
function testKind() {
  const state = { external: { configured: true } as ExternalCheck };
  const release = new Map<string, () => void>();
  const controller: ClaimController = {
    applierOf: (claim) =>
      (claim.spec as { kustomizationRef: { namespace: string; name: string } }).kustomizationRef,
    source: async () => ({ state: "Known", url: REPO, branch: "main" }),
    checkExternal: async () => state.external,
    hold: async () => ({
      conditions: [
        { type: "InControl", status: "True", reason: "Suspended", message: "held" },
        { type: "Ready", status: "True", reason: "Suspended", message: "held" },
      ],
    }),
    handBack: async () => ({ done: true }),
  };
  const kind: ApplierKindModule = {
    createApplierKind: () => ({
      controller,
      executor: {
        async execute(a, report) {
          await report("Running");
          await report("Unresolved", { message: "the applier has not finished within the deadline" });
          await new Promise<void>((r) => release.set(a.token, r));
          await report("Succeeded");
        },
      },
    }),
  };
  return { kind, state, release };
}

const sampleAttempt = (token: string): Attempt =>
  makeAttempt({
    token,
    namespace: "metrics-apps",
    applier: { kind: "flux", namespace: "flux-system", name: "web" },
    branchKey: "git.example/org/repo@main",
    repository: REPO,
    targets: [{ uid: "u", namespace: "metrics-apps", name: "site", reason: "CatchUp" }],
    sentAt: new Date().toISOString(),
  });

/** A TCP relay to the test Redis that can be cut and restored on the same port. */
async function redisRelay(target: URL) {
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  const listen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      const s = createServer((client) => {
        const upstream = new Socket();
        sockets.add(client).add(upstream);
        const drop = () => {
          client.destroy();
          upstream.destroy();
          sockets.delete(client);
          sockets.delete(upstream);
        };
        client.on("error", drop).on("close", drop);
        upstream.on("error", drop).on("close", drop);
        upstream.connect(Number(target.port || 6379), target.hostname, () => {
          client.pipe(upstream).pipe(client);
        });
      });
      s.once("error", reject);
      s.listen(port, "127.0.0.1", () => resolve((s.address() as { port: number }).port));
      server = s;
    });
  const port = await listen(0);
  const url = new URL(target.href);
  url.hostname = "127.0.0.1";
  url.port = String(port);
  return {
    url: url.href,
    async cut() {
      const s = server;
      server = undefined;
      for (const sock of sockets) sock.destroy();
      sockets.clear();
      await new Promise<void>((r) => (s ? s.close(() => r()) : r()));
    },
    restore: () => listen(port),
  };
}

describe("sidecar HTTP endpoints", () => {
  let server: ApiServer;
  beforeAll(async () => {
    server = await startApiServer({ bookmarkIntervalMs: 100 });
    for (const f of crdFiles()) await server.installCrdFile(f);
  });
  afterAll(async () => server?.close());

  /** The sidecar with `kind`, on the API server and Redis given, serving its endpoints on 127.0.0.1. */
  const serving = (
    redis: { url: string; prefix: string },
    kind: ApplierKindModule,
    over: Partial<SidecarOptions<"flux">> = {},
  ) =>
    startSidecar({
      applier: "flux",
      kubeConfig: server.kubeConfig(),
      redisUrl: redis.url,
      redisPrefix: redis.prefix,
      log: silentLogger(),
      kindModule: kind,
      serve: { port: 0, host: "127.0.0.1" },
      ...over,
    });

  it("serves claim Ready, Unresolved operations and counters on /metrics, and health", async () => {
    const redis = await isolatedRedis("sidecar-metrics");
    const { kind, state, release } = testKind();
    const sidecar = await serving(redis, kind, { resyncMs: 200 });
    const q = new Queue(attemptsQueue("flux"), { connection: { url: redis.url }, prefix: redis.prefix });
    try {
      const base = sidecar.http?.url;
      expect(base).toBeDefined();
      const metrics = async () => {
        const res = await fetch(`${base}/metrics`);
        expect(res.status).toBe(200);
        return res.text();
      };
      expect((await fetch(`${base}/healthz`)).status).toBe(200);
      expect((await fetch(`${base}/readyz`)).status).toBe(200);
      expect((await fetch(`${base}/nope`)).status).toBe(404);

      await server.applyYaml(`apiVersion: v1
kind: Namespace
metadata: {name: metrics-apps}
---
apiVersion: applygate.dev/v1alpha1
kind: GitProvider
metadata: {name: repo, namespace: metrics-apps}
spec: {url: "${REPO}.git", type: github, webhookSecretRef: {name: hook}}
---
apiVersion: v1
kind: Namespace
metadata: {name: flux-system}
---
apiVersion: applygate.dev/v1alpha1
kind: ApplierGrant
metadata: {name: metrics-apps, namespace: flux-system}
spec: {from: [{namespace: metrics-apps}]}
---
apiVersion: applygate.dev/v1alpha1
kind: FluxClaim
metadata: {name: web, namespace: metrics-apps}
spec: {kustomizationRef: {name: web, namespace: flux-system}}
---
apiVersion: applygate.dev/v1alpha1
kind: GitTarget
metadata: {name: site, namespace: metrics-apps}
spec: {providerRef: {name: repo}, branch: main, path: apps/site, claimRef: {kind: FluxClaim, name: web}}
`);
      const web = { kind: "FluxClaim", namespace: "metrics-apps", name: "web" };
      await until(
        async () => sample(await metrics(), "applygate_claim_ready", series(web)) === 1,
        "applygate_claim_ready 1",
      );
      expect(await metrics()).toMatch(
        /^applygate_claim_ready\{kind="FluxClaim",claim_namespace="metrics-apps",name="web"\} 1$/m,
      );
      const flux = { applier_kind: "flux" };
      expect(sample(await metrics(), "applygate_operations_unresolved", flux)).toBe(0);

      await q.add("attempt", sampleAttempt("op-1"), { attempts: 1 });
      await until(
        async () => sample(await metrics(), "applygate_operations_unresolved", flux) === 1,
        "one Unresolved operation",
      );
      expect(sample(await metrics(), "applygate_sidecar_attempts_total", flux)).toBe(1);
      await until(async () => release.has("op-1"), "the executor to wait");
      release.get("op-1")?.();
      await until(
        async () => sample(await metrics(), "applygate_operations_unresolved", flux) === 0,
        "no Unresolved operation",
      );
      expect(
        sample(await metrics(), "applygate_sidecar_operations_total", { ...flux, phase: "Succeeded" }),
      ).toBe(1);

      // The kind refuses to hold: Ready=False is 0, not a missing series.
      state.external = { configured: false, reason: "SuspendOwnedElsewhere", message: "someone else" };
      sidecar.reconciler.schedule(0);
      await until(
        async () => sample(await metrics(), "applygate_claim_ready", series(web)) === 0,
        "applygate_claim_ready 0",
      );
      // A deleted claim's series goes away.
      state.external = { configured: true };
      await sidecar.kube.delete(RESOURCES.fluxClaim, "metrics-apps", "web");
      await until(
        async () => sample(await metrics(), "applygate_claim_ready", series(web)) === undefined,
        "applygate_claim_ready removed",
      );
      expect(await metrics()).toContain("process_cpu_seconds_total");
      expect(sample(await metrics(), "applygate_sidecar_ready", flux)).toBe(1);
    } finally {
      for (const r of release.values()) r(); // a failed check must not leave stop() waiting on it
      await sidecar.stop();
      await q.close();
      await redis.cleanup();
    }
  });

  it("/readyz answers 503 while a watch's list fails, naming it, and 200 once it lists again", {
    timeout: 70_000,
  }, async () => {
    const redis = await isolatedRedis("sidecar-ready-watch");
    const { kind } = testKind();
    const sidecar = await serving(redis, kind);
    const readyz = async () => {
      const res = await fetch(`${sidecar.http?.url}/readyz`);
      return { status: res.status, body: await res.text() };
    };
    const targets = "/apis/applygate.dev/v1alpha1/gittargets";
    try {
      await until(async () => (await readyz()).status === 200, "ready");
      // The watch breaks and every list after it fails, as with a permission taken away.
      server.faults.failNext(1_000_000, { method: "GET", pathPrefix: targets, status: 403 });
      expect(server.faults.dropWatches(targets, true)).toBeGreaterThan(0);
      const down = await until(async () => {
        const r = await readyz();
        return r.status === 503 && r;
      }, "503 while the GitTarget list fails");
      expect(down.body).toContain(`watches: not synced: ${targets}`);
      expect(down.body).toContain("redis: ok");
      const ready = async () => {
        const text = await (await fetch(`${sidecar.http?.url}/metrics`)).text();
        return sample(text, "applygate_sidecar_ready", { applier_kind: "flux" });
      };
      expect(await ready()).toBe(0);
      server.faults.reset();
      // The informer lists again after its backoff, which doubles with each failed list up to 30 s
      // (queue/kube/informer.ts); the longer the failures lasted (a loaded machine), the later.
      await until(async () => (await readyz()).status === 200, "ready again once the list lands", 40_000);
      expect(await ready()).toBe(1);
    } finally {
      server.faults.reset();
      await sidecar.stop();
      await redis.cleanup();
    }
  });

  it("/readyz answers 503 while Redis is unreachable and 200 once it answers again", async () => {
    const redis = await isolatedRedis("sidecar-ready");
    const relay = await redisRelay(new URL(redis.url));
    const { kind, release } = testKind();
    const sidecar = await serving({ url: relay.url, prefix: redis.prefix }, kind);
    const q = new Queue(attemptsQueue("flux"), { connection: { url: redis.url }, prefix: redis.prefix });
    const readyz = async () => {
      const res = await fetch(`${sidecar.http?.url}/readyz`);
      return { status: res.status, body: await res.text() };
    };
    try {
      await until(async () => (await readyz()).status === 200, "ready");
      await relay.cut();
      const down = await until(async () => {
        const r = await readyz();
        return r.status === 503 && r;
      }, "503 while Redis is away");
      expect(down.body).toContain("redis: not answering");
      expect(down.body).toContain("claims: synced");
      // Alive all the same: the liveness probe must not restart the container for this.
      expect((await fetch(`${sidecar.http?.url}/healthz`)).status).toBe(200);
      await relay.restore();
      await until(async () => (await readyz()).status === 200, "ready again");
      // And it takes attempts again. (Also lets BullMQ's worker settle on its new connection:
      // a Worker.close() right after a reconnect has been seen to hang.)
      await q.add("attempt", sampleAttempt("op-after-outage"), { attempts: 1 });
      await until(async () => release.has("op-after-outage"), "an attempt taken after the outage");
    } finally {
      for (const r of release.values()) r();
      await sidecar.stop();
      await q.close();
      await relay.cut();
      await redis.cleanup();
    }
  });
});
