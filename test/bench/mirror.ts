/**
 * `npm run bench -- mirror`: the watch plane at 10,000 ConfigMaps across 100 WatchRules (one rule
 * and one GitTarget per namespace, 100 objects each), over the simulated API server and a private
 * Redis prefix: the time from start to every object handed to its inbox (the rules' snapshots), the
 * mirror's heap per watched object, and the time from an edit to its write in the inbox.
 * MIRROR_BENCH_RULES and MIRROR_BENCH_OBJECTS (per rule) change the sizes.
 */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import * as k8s from "@kubernetes/client-node";
import { crdFiles } from "../../queue/crds/files.js";
import { silentLogger } from "../../queue/log.js";
import { Mirror } from "../../sidecar/mirror/mirror.js";
import { startApiServer } from "../cluster/apiserver/index.js";
import { isolatedRedis } from "../redis/isolated.js";
import type { Figure } from "./figure.js";

const RULES = Number(process.env.MIRROR_BENCH_RULES ?? 100);
const PER_RULE = Number(process.env.MIRROR_BENCH_OBJECTS ?? 100);

// A full collection before each heap reading, so the figure is what stays, not garbage.
setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;
const heap = () => {
  gc();
  return process.memoryUsage().heapUsed;
};
const until = async (ok: () => boolean, timeoutMs: number) => {
  const end = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > end) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 20));
  }
};

export async function run(): Promise<Figure[]> {
  const api = await startApiServer({ bookmarkIntervalMs: 1000 });
  const redis = await isolatedRedis("bench-mirror");
  const total = RULES * PER_RULE;
  try {
    for (const f of crdFiles()) await api.installCrdFile(f);
    const docs: object[] = [];
    for (let r = 0; r < RULES; r++) {
      const ns = `team-${r}`;
      docs.push(
        { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } },
        {
          apiVersion: "applygate.dev/v1alpha1",
          kind: "GitProvider",
          metadata: { name: "p", namespace: ns },
          spec: {
            url: `https://git.example/bench/repo-${r}.git`,
            type: "github",
            webhookSecretRef: { name: "hook" },
          },
        },
        {
          apiVersion: "applygate.dev/v1alpha1",
          kind: "GitTarget",
          metadata: { name: "site", namespace: ns },
          spec: { providerRef: { name: "p" }, branch: "main", path: "site" },
        },
        {
          apiVersion: "applygate.dev/v1alpha1",
          kind: "WatchRule",
          metadata: { name: "cms", namespace: ns },
          spec: { targetRef: { name: "site" }, kinds: [{ group: "", version: "v1", kind: "ConfigMap" }] },
        },
      );
      for (let i = 0; i < PER_RULE; i++)
        docs.push({
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: { name: `cm-${i}`, namespace: ns, labels: { app: "bench" } },
          data: { key: `value-${i}`, other: "x".repeat(200) },
        });
    }
    for (let i = 0; i < docs.length; i += 1000)
      await api.applyYaml(
        docs
          .slice(i, i + 1000)
          .map((d) => JSON.stringify(d))
          .join("\n---\n"),
      );
    const before = heap();
    const mirror = new Mirror({
      kubeConfig: api.kubeConfig(),
      redisUrl: redis.url,
      redisPrefix: redis.prefix,
      log: silentLogger(),
      statusIntervalMs: 60_000,
    });
    const t0 = Date.now();
    await mirror.start();
    await until(() => mirror.sent.length >= total, 600_000);
    const snapshotMs = Date.now() - t0;
    await mirror.idle();
    // What stays: the informer caches (the sent log is the benchmark's, so it is emptied first).
    mirror.sent.length = 0;
    const after = heap();
    const core = api.kubeConfig().makeApiClient(k8s.CoreV1Api);
    const lat: number[] = [];
    for (let i = 0; i < 20; i++) {
      const cm = await core.readNamespacedConfigMap({ name: `cm-${i}`, namespace: `team-${i % RULES}` });
      cm.data = { ...cm.data, key: `edited-${i}` };
      const t = Date.now();
      await core.replaceNamespacedConfigMap({
        name: `cm-${i}`,
        namespace: `team-${i % RULES}`,
        body: cm,
        fieldManager: "kubectl-edit",
      });
      await until(() => mirror.sent.length > i, 30_000);
      lat.push(Date.now() - t);
    }
    await mirror.stop();
    lat.sort((a, b) => a - b);
    const size = `${RULES} rules x ${PER_RULE} ConfigMaps`;
    return [
      {
        bench: "mirror: start → every object's snapshot write in its inbox",
        value: snapshotMs,
        unit: "ms",
        note: size,
      },
      {
        bench: "mirror: snapshot writes handed to inboxes per second",
        value: Math.round((total / snapshotMs) * 1000),
        unit: "writes/s",
        note: size,
      },
      {
        bench: "mirror: heap per watched object",
        value: Math.round((after - before) / total),
        unit: "bytes",
        note: `${size}; after a full gc; ConfigMaps of ~300 bytes of data`,
      },
      {
        bench: "mirror: heap for the whole watch plane",
        value: Math.round((after - before) / 1024 / 1024),
        unit: "MiB",
        note: size,
      },
      {
        bench: "mirror: kubectl edit → write in the inbox (median of 20)",
        value: lat[10]!,
        unit: "ms",
        note: size,
      },
    ];
  } finally {
    await redis.cleanup();
    await api.close();
  }
}
