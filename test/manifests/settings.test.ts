/**
 * Settings from the manifests: each container of ours in the built overlays (base, Flux, Argo CD)
 * is started as the kubelet would start it — `applygate` with exactly its `args`, and exactly its
 * `env` with Secrets and fieldRefs resolved from test values — against the test Redis and the
 * simulated API server (KUBECONFIG stands in for the in-cluster ServiceAccount). Then every port
 * it declares must answer and every probe path must return 200 on the port it names.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { CustomObjectsApi } from "@kubernetes/client-node";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { crdFiles } from "../../queue/crds/files.js";
import { type ApiServer, startApiServer } from "../cluster/apiserver/index.js";
import { argocdApplicationCrd } from "../cluster/argosim/index.js";
import { testRedisUrl } from "../redis/isolated.js";
import { machineLock } from "../support/machine-lock.js";
import { untilWith } from "../support/wait.js";
import { build, type K8sObject, KUBECTL_AVAILABLE, OVERLAYS, REPO_ROOT } from "./kustomize.js";
import {
  type ContainerSpec,
  containerEnv,
  containersOf,
  httpProbes,
  writeProcessKubeconfig,
} from "./pod-env.js";

const LAUNCHER = resolve(REPO_ROOT, "queue/cli/applygate.mjs");
const simCrd = (file: string) => resolve(REPO_ROOT, "test/cluster/crds", file);
/** A Redis database of its own: the processes use the default key prefix, as deployed. */
const REDIS_DB = 13;
const until = untilWith({ timeoutMs: 60_000, everyMs: 100, retryErrors: true });

interface Workload {
  overlay: keyof typeof OVERLAYS;
  object: K8sObject;
  container: ContainerSpec;
}

interface Started {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

function portFree(port: number): Promise<boolean> {
  return new Promise((done) => {
    const srv = createServer();
    srv.once("error", () => done(false));
    srv.listen(port, () => srv.close(() => done(true)));
  });
}

/** GET http://127.0.0.1:port/path; the status, or undefined while nothing answers. */
async function get(port: number, path: string): Promise<number | undefined> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(5000) });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return undefined;
  }
}

describe.skipIf(!KUBECTL_AVAILABLE)("settings from the manifests", () => {
  let api: ApiServer;
  let dir: string;
  let kubeconfig: string;
  let redisUrl: string;
  let redis: Redis;
  const workloads: Workload[] = [];
  let release: (() => void) | undefined;

  beforeAll(async () => {
    // The manifests' ports and this Redis database are the machine's: another run of this file
    // on the machine (a second clean clone) waits its turn.
    release = await machineLock("manifest-settings");
    for (const overlay of ["base", "flux", "argocd", "webhook"] as const) {
      for (const object of build(OVERLAYS[overlay])) {
        if (object.kind !== "Deployment" && object.kind !== "StatefulSet") continue;
        for (const container of containersOf(object)) {
          if (container.image.startsWith("ghcr.io/applygate/"))
            workloads.push({ overlay, object, container });
        }
      }
    }
    const url = new URL(testRedisUrl());
    url.pathname = `/${REDIS_DB}`;
    redisUrl = url.toString();
    redis = new Redis(redisUrl);
    await redis.flushdb();
    api = await startApiServer({ bookmarkIntervalMs: 500 });
    for (const f of crdFiles()) await api.installCrdFile(f);
    await api.installCrdFile(simCrd("flux-gitrepository.yaml"));
    await api.installCrdFile(simCrd("flux-kustomization.yaml"));
    await api.installCrdFile(argocdApplicationCrd("3.5"));
    await api.installCrdFile(simCrd("argocd-appproject.yaml"));
    await api.installCrdFile(simCrd("argocd-applicationset.yaml"));
    dir = mkdtempSync(join(tmpdir(), "applygate-settings-"));
    kubeconfig = join(dir, "kubeconfig");
    await writeProcessKubeconfig(api, kubeconfig);
    await api.applyYaml(`apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: v1
kind: Secret
metadata: {name: hook, namespace: team-a}
stringData: {token: settings-token}
---
apiVersion: applygate.dev/v1alpha1
kind: GitProvider
metadata: {name: repo, namespace: team-a}
spec: {url: "https://git.example/org/repo.git", type: github, webhookSecretRef: {name: hook}}
`);
  }, 360_000);

  afterAll(async () => {
    await redis?.flushdb();
    redis?.disconnect();
    await api?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
    release?.();
  });

  /** Starts the container's process as the kubelet would, with `secrets` as the cluster's Secrets. */
  function start(w: Workload, secrets: Record<string, Record<string, string>>): Started {
    const namespace = w.object.metadata.namespace ?? "default";
    const podName = `${w.object.metadata.name}-0`;
    const env = containerEnv(w.container, { podName, namespace, secrets });
    expect(w.container.command, "the image's entrypoint runs applygate").toBeUndefined();
    const child = spawn(process.execPath, [LAUNCHER, ...(w.container.args ?? [])], {
      cwd: dir,
      // What the container has: its env, the host name the runtime sets, and an account.
      env: { PATH: process.env.PATH ?? "", HOSTNAME: podName, KUBECONFIG: kubeconfig, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout?.on("data", (d) => (out += d));
    child.stderr?.on("data", (d) => (out += d));
    const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
    return { child, output: () => out, exited };
  }

  async function stop(s: Started): Promise<number | null> {
    if (s.child.exitCode === null) s.child.kill("SIGTERM");
    return s.exited;
  }

  /** Every declared port answers and every probe path returns 200 there; returns the process. */
  async function startAndProbe(
    w: Workload,
    secrets: Record<string, Record<string, string>>,
    extra: (s: Started) => Promise<void> = async () => {},
  ): Promise<void> {
    const where = `${w.object.kind} ${w.object.metadata.name}/${w.container.name}`;
    for (const p of w.container.ports ?? []) {
      expect(await portFree(p.containerPort), `port ${p.containerPort} is taken on this machine`).toBe(true);
    }
    const s = start(w, secrets);
    try {
      const probes = httpProbes(w.container);
      expect(probes.length, `${where} has probes`).toBeGreaterThan(0);
      for (const probe of probes) {
        await until(async () => {
          if (s.child.exitCode !== null)
            throw new Error(`${where} exited ${s.child.exitCode}:\n${s.output()}`);
          return (await get(probe.port, probe.path)) === 200;
        }, `${where} ${probe.kind} GET ${probe.path} on ${probe.port} to answer 200\n${s.output()}`);
      }
      for (const p of w.container.ports ?? []) {
        expect(await get(p.containerPort, "/healthz"), `${where} port ${p.name}`).toBeDefined();
      }
      await extra(s);
    } finally {
      const code = await stop(s);
      // Exit 0 after a graceful stop, or ended by the SIGTERM itself while still starting.
      const ended = code === 0 || (code === null && s.child.signalCode === "SIGTERM");
      expect(ended, `${where} stops on SIGTERM (exit ${code}):\n${s.output()}`).toBe(true);
    }
  }

  const only = (overlay: Workload["overlay"], container: string) => {
    const found = workloads.filter((w) => w.overlay === overlay && w.container.name === container);
    expect(found, `${overlay}/${container}`).toHaveLength(1);
    return found[0]!;
  };
  const redisSecret = (namespace: string) => ({ [`${namespace}/applygate-redis`]: { url: redisUrl } });

  it("finds the gateway, the worker, the mirror and both sidecars", () => {
    expect(workloads.map((w) => `${w.overlay}/${w.container.name}`).sort()).toEqual(
      [
        "argocd/applygate-sidecar",
        "base/gateway",
        "base/mirror",
        "base/worker",
        "flux/applygate-sidecar",
        "webhook/webhook",
      ].sort(),
    );
  });

  it("starts the gateway as deployed, with the dashboard off until Secret applygate-dashboard exists", async () => {
    const w = only("base", "gateway");
    await startAndProbe(w, redisSecret("applygate-system"), async (s) => {
      const port = w.container.ports![0]!.containerPort;
      expect(await get(port, "/queues")).toBe(404);
      // Metrics on their own port, never beside the receivers.
      const metricsPort = w.container.ports!.find((p) => p.name === "metrics")!.containerPort;
      expect(await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text()).toContain(
        "applygate_gateway_",
      );
      expect(await get(port, "/metrics")).toBe(404);
      // It reads the cluster: the GitProvider's status is written with its webhook path.
      const custom = api.kubeConfig().makeApiClient(CustomObjectsApi);
      await until(async () => {
        const p = (await custom.getNamespacedCustomObject({
          group: "applygate.dev",
          version: "v1alpha1",
          plural: "gitproviders",
          namespace: "team-a",
          name: "repo",
        })) as { status?: { webhookPath?: string } };
        return p.status?.webhookPath?.startsWith("/hook/");
      }, "the gateway to write the GitProvider's status");
      await until(
        () => s.output().includes("dashboard off: no credentials given"),
        "the dashboard-off log line",
      );
    });
    await startAndProbe(
      w,
      {
        ...redisSecret("applygate-system"),
        "applygate-system/applygate-dashboard": { user: "ops", password: "pw" },
      },
      async () => {
        const port = w.container.ports![0]!.containerPort;
        expect(await get(port, "/queues")).toBe(401);
      },
    );
  });

  it("starts the worker as deployed: metrics, /healthz and /readyz on the port its Deployment names", async () => {
    const w = only("base", "worker");
    await startAndProbe(w, redisSecret("applygate-system"), async () => {
      const port = w.container.ports!.find((p) => p.name === "metrics")!.containerPort;
      const res = await fetch(`http://127.0.0.1:${port}/metrics`);
      expect(await res.text()).toContain("applygate_worker_");
    });
  });

  it("starts the Flux sidecar as deployed, and it is ready", async () => {
    const w = only("flux", "applygate-sidecar");
    await startAndProbe(w, redisSecret("flux-system"), async () => {
      const port = w.container.ports![0]!.containerPort;
      await until(async () => (await get(port, "/readyz")) === 200, "the Flux sidecar ready");
    });
  });

  it("starts the Argo CD sidecar as deployed, ready without ever listing Secrets", async () => {
    const w = only("argocd", "applygate-sidecar");
    // A cluster-wide Secret list would fail, and the sidecar would not be ready.
    api.faults.failNext(1_000_000, { method: "GET", pathPrefix: "/api/v1/secrets", status: 403 });
    try {
      await startAndProbe(w, redisSecret("argocd"), async () => {
        const port = w.container.ports![0]!.containerPort;
        // Ready: Redis answers, the claims and every watch of the window observer (ConfigMaps,
        // Services, Deployments; no Secrets) synced, though every Secret list is refused.
        await until(async () => (await get(port, "/readyz")) === 200, "the Argo CD sidecar ready");
      });
    } finally {
      api.faults.reset();
    }
  });

  it("starts the webhook applier as deployed (sidecar --applier webhook), ready with no WebhookClaim", async () => {
    const w = only("webhook", "webhook");
    expect(w.container.args).toEqual(["sidecar", "--applier", "webhook"]);
    await startAndProbe(w, redisSecret("applygate-system"), async () => {
      const port = w.container.ports![0]!.containerPort;
      await until(async () => (await get(port, "/readyz")) === 200, "the webhook applier ready");
    });
  });

  it("starts a sidecar without Secret applygate-redis: the pod starts and the container stays alive", async () => {
    // The kubelet refuses to start a pod (CreateContainerConfigError, the applier with it) whose
    // container needs a missing Secret; an optional reference starts it without the variable.
    // (Whether it is ready then depends on 127.0.0.1:6379, which answers on this machine; the
    // Redis outage itself is sidecar/metrics.test.ts's.)
    for (const overlay of ["flux", "argocd"] as const) {
      const w = only(overlay, "applygate-sidecar");
      expect(
        containerEnv(w.container, { podName: "p", namespace: "n", secrets: {} }).REDIS_URL,
      ).toBeUndefined();
    }
    await startAndProbe(only("flux", "applygate-sidecar"), {});
  });
});
