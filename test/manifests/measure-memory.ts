/**
 * `node --import tsx test/manifests/measure-memory.ts [launcher]`: the idle memory of each process
 * as the manifests start it (the same args and env as settings.test.ts), against the simulated API
 * server and the test Redis, and of the Argo CD sidecar with many large Secrets in the cluster,
 * watching Secrets or not. Prints resident and peak memory (VmRSS, VmHWM) after readiness and a
 * settling pause. docs/operations.md says how the manifests' requests and limits follow from it.
 * The launcher defaults to the compiled dist/queue/cli/applygate.mjs (`npm run build`), as in the image.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { CoreV1Api } from "@kubernetes/client-node";
import { crdFiles } from "../../queue/crds/files.js";
import { startApiServer } from "../cluster/apiserver/index.js";
import { argocdApplicationCrd } from "../cluster/argosim/index.js";
import { build, OVERLAYS, REPO_ROOT } from "./kustomize.js";
import { containerEnv, containersOf, httpProbes, writeProcessKubeconfig } from "./pod-env.js";

const launcher = resolve(process.argv[2] ?? resolve(REPO_ROOT, "dist/queue/cli/applygate.mjs"));
if (!existsSync(launcher)) throw new Error(`${launcher} not found: run npm run build first`);
const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379/14";
const settleMs = Number(process.env.SETTLE_MS ?? 15_000);
const simCrd = (file: string) => resolve(REPO_ROOT, "test/cluster/crds", file);

const api = await startApiServer({ bookmarkIntervalMs: 1000 });
for (const f of crdFiles()) await api.installCrdFile(f);
await api.installCrdFile(simCrd("flux-kustomization.yaml"));
await api.installCrdFile(simCrd("flux-gitrepository.yaml"));
await api.installCrdFile(argocdApplicationCrd("3.5"));
await api.installCrdFile(simCrd("argocd-appproject.yaml"));
await api.installCrdFile(simCrd("argocd-applicationset.yaml"));
const dir = mkdtempSync(join(tmpdir(), "applygate-memory-"));
const kubeconfig = join(dir, "kubeconfig");
await writeProcessKubeconfig(api, kubeconfig);

const mib = (kb: number) => `${(kb / 1024).toFixed(0)} MiB`;
function memory(pid: number): { rss: number; hwm: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? 0);
  return { rss: kb("VmRSS"), hwm: kb("VmHWM") };
}

async function measure(
  label: string,
  overlay: keyof typeof OVERLAYS,
  name: string,
  extraArgs: string[] = [],
) {
  const object = build(OVERLAYS[overlay]).find(
    (o) =>
      (o.kind === "Deployment" || o.kind === "StatefulSet") && containersOf(o).some((c) => c.name === name),
  )!;
  const c = containersOf(object).find((x) => x.name === name)!;
  const namespace = object.metadata.namespace ?? "default";
  const env = containerEnv(c, {
    podName: `${object.metadata.name}-0`,
    namespace,
    secrets: { [`${namespace}/applygate-redis`]: { url: redisUrl } },
  });
  const child = spawn(process.execPath, [launcher, ...(c.args ?? []), ...extraArgs], {
    env: { PATH: process.env.PATH ?? "", KUBECONFIG: kubeconfig, ...env },
    stdio: "ignore",
  });
  const readiness = httpProbes(c).find((p) => p.kind === "readinessProbe") ?? {
    port: httpProbes(c)[0]!.port,
    path: "/readyz",
  };
  const deadline = Date.now() + 120_000;
  for (;;) {
    const status = await fetch(`http://127.0.0.1:${readiness.port}${readiness.path}`).then(
      (r) => r.status,
      () => 0,
    );
    if (status === 200) break;
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`${label} never got ready`);
    await new Promise((r) => setTimeout(r, 200));
  }
  await new Promise((r) => setTimeout(r, settleMs));
  const m = memory(child.pid!);
  console.log(`${label.padEnd(52)} rss ${mib(m.rss).padStart(8)}   peak ${mib(m.hwm).padStart(8)}`);
  child.kill("SIGTERM");
  await new Promise((r) => child.once("exit", r));
}

if (!process.env.ONLY_SECRETS) {
  await measure("gateway (idle, dashboard off)", "base", "gateway");
  await measure("worker (idle)", "base", "worker");
  await measure("sidecar --applier flux (idle)", "flux", "applygate-sidecar");
  await measure("sidecar --applier argocd (idle)", "argocd", "applygate-sidecar");
}

const count = Number(process.env.SECRETS ?? 300);
const size = Number(process.env.SECRET_BYTES ?? 256 * 1024);
const payload = Buffer.alloc(size, "x").toString("base64");
await api.applyYaml("apiVersion: v1\nkind: Namespace\nmetadata: {name: helm-apps}\n");
for (let i = 0; i < count; i++) {
  await api.applyYaml(
    `apiVersion: v1\nkind: Secret\nmetadata: {name: sh.helm.release.v1.app${i}.v1, namespace: helm-apps}\ntype: helm.sh/release.v1\ndata: {release: ${payload}}\n`,
  );
}
const listed = await api.kubeConfig().makeApiClient(CoreV1Api).listSecretForAllNamespaces();
const bytes = listed.items.reduce((n, s) => n + (s.data?.release?.length ?? 0), 0);
console.log(
  `the cluster holds ${listed.items.length} Secrets, ${(bytes / 1024 / 1024).toFixed(0)} MiB of base64 data`,
);
const total = `${count} Secrets of ${size / 1024} KiB`;
await measure(`sidecar --applier argocd, ${total}`, "argocd", "applygate-sidecar");
await measure(`  the same watching Secrets (the former default)`, "argocd", "applygate-sidecar", [
  "--watch-kinds",
  "v1/ConfigMap,v1/Secret,v1/Service,apps/v1/Deployment",
]);
await api.close();
rmSync(dir, { recursive: true, force: true });
process.exit(0);
