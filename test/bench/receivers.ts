/**
 * `npm run bench -- receivers`: push → applied on the real components, through the receivers people
 * install today and through applygate (installed and run as test/real/applygate.ts does), on one
 * real control plane in one run (test/real/push-to-applied.ts). Each push commits to our Git smart-HTTP server, then delivers the same
 * signed GitHub push event; the time runs from the delivery until the Kustomization reports
 * `main@sha1:<commit>` as lastAppliedRevision, or the Application its last operation Succeeded at
 * the commit (status read every 20 ms). Pushes go to the setups in turn, so
 * each meets the same machine load. Per setup: p50, p99 and the API requests per apply the
 * components made (kube-apiserver's audit.log, by the setup's ServiceAccounts, during its pushes).
 *
 * Then verified pushes per second through notification-controller's Receiver and through
 * applygate's gateway (`RECEIVERS_THROUGHPUT_SECONDS`, default 5, each).
 *
 * `RECEIVERS_BENCH_PUSHES` (default 20) pushes per setup; `RECEIVERS_KEEP=1` keeps the logs and audit.log. Skipped with a notice naming what is
 * missing when the real components are not built (`npm run real:build`).
 */
import { availableParallelism, loadavg } from "node:os";
import autocannon from "autocannon";
import { type GitServer, startGitServer } from "../git/server.js";
import { readAudit } from "../real/applygate.js";
import { findRealBinaries, RECEIVERS_BINARIES } from "../real/binaries.js";
import { type RealCluster, startRealCluster } from "../real/cluster.js";
import {
  argoApplygateSetup,
  argoWebhookSetup,
  fluxApplygateSetup,
  fluxReceiverSetup,
  POLL_MS,
  type Setup,
  startReceiverComponents,
} from "../real/push-to-applied.js";
import { createGithubReceiver, githubHeaders } from "../real/receivers.js";
import { percentile } from "../support/percentile.js";
import type { Figure } from "./figure.js";

const PUSHES = Number(process.env.RECEIVERS_BENCH_PUSHES ?? 20);
const THROUGHPUT_SECONDS = Number(process.env.RECEIVERS_THROUGHPUT_SECONDS ?? 5);
const THROUGHPUT_CONNECTIONS = 16;
const SECRET = "receivers-bench-secret";

/** Whose requests count for a setup: the ServiceAccounts of the namespaces its components run in. */
const IDENTITIES: Record<string, string[]> = {
  "flux-receiver": ["system:serviceaccount:flux-system:"],
  "argocd-webhook": ["system:serviceaccount:argocd:"],
  "flux-applygate": ["system:serviceaccount:flux-system:", "system:serviceaccount:applygate-system:"],
  "argocd-applygate": ["system:serviceaccount:argocd:", "system:serviceaccount:applygate-system:"],
};

/**
 * Verified pushes per second through notification-controller's Receiver and through applygate's
 * gateway, each saturated in turn with its setup's last push delivered again (a fresh delivery id
 * and signature per request): the same payload, the same machine. A Receiver answers once it
 * asked for the fetch (an annotation written through the API server), the gateway once Redis
 * holds the notice.
 */
async function verifiedPushesPerSecond(setups: Setup[], note: (extra: string) => string): Promise<Figure[]> {
  const figures: Figure[] = [];
  const rates: Record<string, number> = {};
  for (const name of ["flux-receiver", "flux-applygate"]) {
    const last = setups.find((s) => s.name === name)?.lastDelivery();
    if (!last) continue;
    step(`${name}: ${THROUGHPUT_SECONDS} s of the same push, ${THROUGHPUT_CONNECTIONS} connections`);
    const body = JSON.stringify(last.payload);
    const result = await autocannon({
      url: last.url,
      method: "POST",
      connections: THROUGHPUT_CONNECTIONS,
      duration: THROUGHPUT_SECONDS,
      body,
      requests: [{ setupRequest: (req: any) => ({ ...req, headers: githubHeaders(last.secret, body) }) }],
    });
    const ok = result["2xx"];
    rates[name] = ok / result.duration;
    figures.push({
      bench: `receivers.${name}.verified_pushes_per_s`,
      value: Math.round(ok / result.duration),
      unit: "pushes/s",
      ...(name === "flux-applygate" && rates["flux-receiver"]
        ? {
            baseline: Math.round(rates["flux-receiver"]),
            ratio: Number((ok / result.duration / rates["flux-receiver"]).toFixed(2)),
          }
        : {}),
      note: note(
        `${THROUGHPUT_CONNECTIONS} connections for ${THROUGHPUT_SECONDS} s, the last push again; p99 ${result.latency.p99} ms, ${result.non2xx} answered non-2xx, ${result.errors} errors`,
      ),
    });
  }
  return figures;
}

const step = (what: string) => process.stderr.write(`receivers ${new Date().toISOString()} ${what}\n`);

export async function run(): Promise<Figure[]> {
  const bins = findRealBinaries(RECEIVERS_BINARIES);
  if (!bins.built) {
    process.stderr.write(
      `\n!!! SKIPPED bench receivers (push → applied on the real components, nothing measured): ${bins.message}\n\n`,
    );
    return [];
  }
  let cluster: RealCluster | undefined;
  let git: GitServer | undefined;
  let components: Awaited<ReturnType<typeof startReceiverComponents>> | undefined;
  const setups: Setup[] = [];
  try {
    // RECEIVERS_KEEP=1 keeps the cluster's folder (every component's log, audit.log) for a look.
    cluster = await startRealCluster({ quiet: true, keep: Boolean(process.env.RECEIVERS_KEEP) });
    if (process.env.RECEIVERS_KEEP) step(`keeping ${cluster.dir}`);
    git = await startGitServer();
    components = await startReceiverComponents(cluster, {
      redisUrl: process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379",
      secret: SECRET,
      quiet: true,
    });
    const { nc, server, applygate } = components;
    const kc = cluster.kubeConfig();
    const ctx = { kc, git };
    const receiverUrl = nc.receiverUrl;
    step("components ready; setting up");
    setups.push(
      await fluxReceiverSetup(ctx, {
        namespace: "flux-receiver",
        receiverUrl,
        secret: SECRET,
        createReceiver: (namespace) =>
          createGithubReceiver(kc, { namespace, gitRepository: "apps", secret: SECRET }),
      }),
    );
    setups.push(
      await argoWebhookSetup(ctx, {
        namespace: "argocd-webhook",
        appName: "argocd-webhook",
        webhookUrl: server.webhookUrl,
        secret: SECRET,
      }),
    );

    setups.push(
      await fluxApplygateSetup(ctx, {
        namespace: "flux-applygate",
        gatewayUrl: applygate.gatewayUrl,
        secret: SECRET,
      }),
    );
    setups.push(
      await argoApplygateSetup(ctx, {
        namespace: "argocd-applygate",
        appName: "argocd-applygate",
        gatewayUrl: applygate.gatewayUrl,
        secret: SECRET,
      }),
    );

    const times = new Map<string, number[]>(setups.map((s) => [s.name, []]));
    const requests = new Map<string, number>(setups.map((s) => [s.name, 0]));
    for (let i = 1; i <= PUSHES; i++) {
      for (const s of setups) {
        const mark = readAudit(cluster.auditLogPath).end;
        const t = await s.push(String(i));
        if (t.value !== String(i))
          throw new Error(`${s.name}: push ${i} applied, but the cluster holds ${t.value}`);
        times.get(s.name)?.push(t.ms);
        // The audit backend writes as requests finish: a short pause lets the last ones land.
        await new Promise((r) => setTimeout(r, 200));
        const prefixes = IDENTITIES[s.name] ?? [];
        const own = new Set(
          readAudit(cluster.auditLogPath, mark)
            .events.filter((e) => prefixes.some((p) => e.user.username.startsWith(p)))
            .map((e) => e.auditID),
        );
        requests.set(s.name, (requests.get(s.name) ?? 0) + own.size);
      }
      step(`push ${i}/${PUSHES} applied by ${setups.map((s) => s.name).join(", ")}`);
    }

    const load = loadavg()[0]?.toFixed(2);
    const note = (extra: string) =>
      `${PUSHES} pushes, real components on one machine (${availableParallelism()} cores, load ${load}), ` +
      `status read every ${POLL_MS} ms; ${extra}`;
    const figures: Figure[] = [];
    const plain: Record<string, string> = {
      "flux-applygate": "flux-receiver",
      "argocd-applygate": "argocd-webhook",
    };
    for (const s of setups) {
      const xs = times.get(s.name) ?? [];
      const p50 = percentile(xs, 50);
      const base = plain[s.name] ? percentile(times.get(plain[s.name] as string) ?? [], 50) : undefined;
      figures.push({
        bench: `receivers.${s.name}.push_to_applied_p50`,
        value: Math.round(p50),
        unit: "ms",
        ...(base ? { baseline: Math.round(base), ratio: Number((p50 / base).toFixed(2)) } : {}),
        note: note(`min ${Math.round(Math.min(...xs))} ms, max ${Math.round(Math.max(...xs))} ms`),
      });
      figures.push({
        bench: `receivers.${s.name}.push_to_applied_p99`,
        value: Math.round(percentile(xs, 99)),
        unit: "ms",
        note: note(PUSHES < 100 ? `p99 of ${PUSHES} pushes is the slowest` : "p99"),
      });
      figures.push({
        bench: `receivers.${s.name}.api_requests_per_apply`,
        value: Number(((requests.get(s.name) ?? 0) / PUSHES).toFixed(1)),
        unit: "requests",
        note: note(
          `kube-apiserver audit.log, requests by ${(IDENTITIES[s.name] ?? []).join(" and ")}* during the push`,
        ),
      });
    }
    figures.push(...(await verifiedPushesPerSecond(setups, note)));
    return figures;
  } finally {
    for (const s of setups) await s.remove().catch(() => undefined);
    await components?.stop();
    await cluster?.stop();
    await git?.close();
  }
}
