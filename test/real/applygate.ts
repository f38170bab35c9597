// applygate as deployed, on the real control plane (test/real/cluster.ts):
//
//   const app = await buildApplygate();                 // the image's /app: compiled JS, cached
//   const installed = await installApplygate(cluster, { redisUrl, appliers: ["webhook"] });
//   const worker = await startComponent(installed, "worker");
//   const sidecar = await startSidecar(installed, "webhook");
//   const audit = auditSince(cluster.auditLogPath, mark);  // per component: requests, 403s, 422s
//
// The install is `kubectl apply --server-side -k` of the built overlays, as docs/install.md says,
// so the CRDs meet the real structural-schema and CEL validation, the ValidatingAdmissionPolicy the
// real admission and the RBAC the real authorizer. Each component then runs as the image runs it
// (the Containerfile's ENTRYPOINT and ENV, in a folder laid out like its /app) with exactly the args
// and env of its container in the Deployment or StatefulSet read back from the API server, Secrets
// and fieldRefs resolved as the kubelet resolves them, and a kubeconfig carrying its
// ServiceAccount's own token from TokenRequest. Only in-cluster addresses are translated: each
// declared port to an ephemeral one on 127.0.0.1 (through the setting whose default is that port),
// the Redis URL in Secret applygate-redis to a loopback Redis under a prefix of this install, the
// pod's /tmp to a folder of its own, and, for the webhook applier, the in-cluster endpoints it calls
// to loopback ones (which its address guard refuses unless told).
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, openSync, readdirSync, readFileSync, statSync } from "node:fs";
import { mkdir, mkdtemp, readlink, rename, rm, symlink, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { homedir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { promisify } from "node:util";
import { AppsV1Api, CoreV1Api } from "@kubernetes/client-node";
import { stringify } from "yaml";
import { gatewaySettings } from "../../gateway/main.js";
import type { Settings } from "../../queue/config.js";
import { connectRedis } from "../../queue/redis.js";
import { workerSettings } from "../../queue/worker-main.js";
import { sidecarSettings } from "../../sidecar/main.js";
import { mirrorSettings } from "../../sidecar/mirror/main.js";
import { OVERLAYS, REPO_ROOT } from "../manifests/kustomize.js";
import { type ContainerSpec, containerEnv } from "../manifests/pod-env.js";
import type { RealCluster } from "./cluster.js";

const run = promisify(execFile);
const READY_TIMEOUT_MS = 90_000;
const tail = (text: string, lines = 40) => text.trimEnd().split("\n").slice(-lines).join("\n");

export type ComponentName = "gateway" | "worker" | "mirror";
export type SidecarKind = "flux" | "argocd" | "webhook";

/** Where each process of ours is declared: the workload and container the overlays build. */
export const WORKLOADS: Record<
  ComponentName | SidecarKind,
  { kind: "Deployment" | "StatefulSet"; namespace: string; name: string; container: string; overlay: string }
> = {
  gateway: {
    kind: "Deployment",
    namespace: "applygate-system",
    name: "applygate-gateway",
    container: "gateway",
    overlay: OVERLAYS.base,
  },
  worker: {
    kind: "Deployment",
    namespace: "applygate-system",
    name: "applygate-worker",
    container: "worker",
    overlay: OVERLAYS.base,
  },
  mirror: {
    kind: "Deployment",
    namespace: "applygate-system",
    name: "applygate-mirror",
    container: "mirror",
    overlay: OVERLAYS.base,
  },
  // The Flux and Argo CD components patch the applier's own workload; the fixtures stand in for the
  // kustomization a user installs Flux or Argo CD with (docs/install.md, 3a and 3b).
  flux: {
    kind: "Deployment",
    namespace: "flux-system",
    name: "kustomize-controller",
    container: "applygate-sidecar",
    overlay: OVERLAYS.flux,
  },
  argocd: {
    kind: "StatefulSet",
    namespace: "argocd",
    name: "argocd-application-controller",
    container: "applygate-sidecar",
    overlay: OVERLAYS.argocd,
  },
  webhook: {
    kind: "Deployment",
    namespace: "applygate-system",
    name: "applygate-webhook",
    container: "webhook",
    overlay: OVERLAYS.webhook,
  },
};

/** Each subcommand's settings: where a declared port's number and a listen address are set. */
const SETTINGS: Record<string, Settings> = {
  gateway: gatewaySettings,
  worker: workerSettings,
  sidecar: sidecarSettings,
  mirror: mirrorSettings,
};

// ---------------------------------------------------------------------------------------------
// The image's /app

interface ImageFacts {
  workdir: string;
  entrypoint: string[];
  env: Record<string, string>;
}

/** WORKDIR, ENTRYPOINT and ENV of the Containerfile's last stage. Pure. */
export function imageFacts(containerfile: string): ImageFacts {
  const lines = containerfile.replace(/\\\n\s*/g, " ").split("\n");
  let last = 0;
  lines.forEach((l, i) => {
    if (/^FROM\s/i.test(l.trim())) last = i;
  });
  const facts: ImageFacts = { workdir: "/", entrypoint: [], env: {} };
  for (const line of lines.slice(last).map((l) => l.trim())) {
    const m = /^(WORKDIR|ENTRYPOINT|ENV)\s+(.*)$/i.exec(line);
    if (!m) continue;
    const [, op, rest] = m as unknown as [string, string, string];
    if (op.toUpperCase() === "WORKDIR") facts.workdir = rest.trim();
    else if (op.toUpperCase() === "ENTRYPOINT") facts.entrypoint = JSON.parse(rest) as string[];
    else for (const [, k, v] of rest.matchAll(/(\w+)=(\S+)/g)) facts.env[k as string] = v as string;
  }
  if (facts.entrypoint[0] !== "node")
    throw new Error(`the image's entrypoint is not node: ${facts.entrypoint}`);
  return facts;
}

const IMAGE = imageFacts(readFileSync(join(REPO_ROOT, "manifests/Containerfile"), "utf8"));

function sourceHash(): string {
  const hash = createHash("sha256");
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir).sort()) {
      const file = join(dir, entry);
      if (statSync(file).isDirectory()) walk(file);
      else if (/\.(m?ts|m?js|json)$/.test(entry)) {
        hash.update(`${relative(REPO_ROOT, file)}\0`);
        hash.update(readFileSync(file));
      }
    }
  };
  for (const dir of ["gateway", "queue", "sidecar"]) walk(join(REPO_ROOT, dir));
  for (const f of ["package.json", "package-lock.json", "tsconfig.json", "manifests/tsconfig.build.json"])
    hash.update(readFileSync(join(REPO_ROOT, f)));
  return hash.digest("hex").slice(0, 16);
}

/**
 * The image's /app: the product compiled as `npm run build` compiles it (manifests/tsconfig.build.json),
 * with package.json beside it and the dependencies. Kept outside the repository, keyed by the hash of
 * the sources, so a second run takes no time.
 */
export async function buildApplygate(): Promise<string> {
  const root = join(process.env.XDG_CACHE_HOME || join(homedir(), ".cache"), "applygate-real", "app");
  const dir = join(root, sourceHash());
  if (existsSync(join(dir, ".complete"))) {
    await linkDependencies(dir);
    return dir;
  }
  await mkdir(root, { recursive: true });
  const work = await mkdtemp(join(root, "building-"));
  try {
    await run(
      process.execPath,
      [
        join(REPO_ROOT, "node_modules/typescript/bin/tsc"),
        "-p",
        join(REPO_ROOT, "manifests/tsconfig.build.json"),
        "--outDir",
        work,
      ],
      { cwd: REPO_ROOT, maxBuffer: 16 << 20 },
    );
    await writeFile(join(work, "package.json"), readFileSync(join(REPO_ROOT, "package.json")));
    await linkDependencies(work);
    await writeFile(join(work, ".complete"), "");
    await rename(work, dir).catch(async (err: unknown) => {
      // Another run built the same sources meanwhile.
      if (!existsSync(join(dir, ".complete"))) throw err;
      await rm(work, { recursive: true, force: true });
    });
  } catch (err) {
    await rm(work, { recursive: true, force: true });
    throw err;
  }
  return dir;
}

/**
 * Points the build's node_modules at this checkout's. A build is shared by every checkout with the
 * same sources and lockfile, so the checkout that built it may be gone (a removed clone left the
 * link dangling, and every component failed to start with ERR_MODULE_NOT_FOUND); replaced by a
 * rename, so a run starting a component meanwhile sees one link or the other, never none.
 */
async function linkDependencies(dir: string): Promise<void> {
  const want = join(REPO_ROOT, "node_modules");
  const link = join(dir, "node_modules");
  if ((await readlink(link).catch(() => undefined)) === want) return;
  const next = `${link}.${process.pid}.${randomBytes(4).toString("hex")}`;
  await symlink(want, next);
  await rename(next, link);
}

// ---------------------------------------------------------------------------------------------
// Install

export interface InstallOptions {
  /** The loopback Redis the in-cluster URL of Secret applygate-redis is translated to. */
  redisUrl: string;
  /** Which appliers' overlays to add to the base (default: all three). */
  appliers?: SidecarKind[];
}

export interface Installed {
  cluster: RealCluster;
  /** The image's /app (buildApplygate). */
  app: string;
  /** Redis key prefix of every process of this install. */
  prefix: string;
  redisUrl: string;
  /** The output of each `kubectl apply`, by overlay. */
  applied: Record<string, string>;
  /** Folder of the processes' logs, kubeconfigs and /tmp. */
  dir: string;
  appliers: SidecarKind[];
}

export async function kubectl(
  cluster: RealCluster,
  args: string[],
  o: { kubeconfig?: string; input?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<{ code: number; out: string; err: string }> {
  return new Promise((done) => {
    const child = execFile(
      "kubectl",
      args,
      {
        cwd: REPO_ROOT,
        env: { ...process.env, ...o.env, KUBECONFIG: o.kubeconfig ?? cluster.kubeconfigPath },
        maxBuffer: 64 << 20,
      },
      (err, out, errOut) =>
        done({
          code: err ? ((err as { code?: number }).code ?? 1) : 0,
          out: String(out),
          err: String(errOut),
        }),
    );
    if (o.input !== undefined) child.stdin?.end(o.input);
  });
}

async function kubectlOk(cluster: RealCluster, args: string[], o?: Parameters<typeof kubectl>[2]) {
  const r = await kubectl(cluster, args, o);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")} failed (${r.code}):\n${r.out}${r.err}`);
  return r;
}

/** kubectl's arguments that wait until every CRD of applygate is established. */
export const WAIT_CRDS_ESTABLISHED = [
  "wait",
  "--for=condition=Established",
  "crd",
  "-l",
  "app.kubernetes.io/part-of=applygate",
  "--timeout=60s",
];

/**
 * Installs applygate as docs/install.md does: the Secret applygate-redis in each namespace that
 * reads it, then `kubectl apply --server-side -k` of the base and of each applier's overlay.
 */
export async function installApplygate(cluster: RealCluster, o: InstallOptions): Promise<Installed> {
  const app = await buildApplygate();
  const appliers = o.appliers ?? ["flux", "argocd", "webhook"];
  const prefix = `real-${randomBytes(4).toString("hex")}`;
  const dir = await mkdtemp(join(cluster.dir, "applygate-"));
  const applied: Record<string, string> = {};
  const namespaces = ["applygate-system", ...appliers.map((a) => WORKLOADS[a].namespace)];
  for (const ns of new Set(namespaces)) {
    // flux-system or argocd may be there already (real Flux or Argo CD installed first).
    if ((await kubectl(cluster, ["get", "namespace", ns])).code !== 0)
      await kubectlOk(cluster, ["create", "namespace", ns]);
    await kubectlOk(cluster, [
      "-n",
      ns,
      "create",
      "secret",
      "generic",
      "applygate-redis",
      `--from-literal=url=${o.redisUrl}`,
      ...(ns === "applygate-system" ? [`--from-literal=password=${randomBytes(12).toString("hex")}`] : []),
    ]);
  }
  for (const overlay of [OVERLAYS.base, ...appliers.map((a) => WORKLOADS[a].overlay)]) {
    const r = await kubectlOk(cluster, ["apply", "--server-side", "-k", overlay]);
    applied[overlay] = `${r.out}${r.err}`;
  }
  await kubectlOk(cluster, WAIT_CRDS_ESTABLISHED);
  return { cluster, app, prefix, redisUrl: o.redisUrl, applied, dir, appliers };
}

/** Deletes the install's keys (under its prefix: others may share the Redis). */
export async function deleteInstallKeys(installed: Pick<Installed, "redisUrl" | "prefix">): Promise<void> {
  const client = connectRedis(installed.redisUrl);
  let cursor = "0";
  do {
    const [next, keys] = await client.scan(cursor, "MATCH", `${installed.prefix}*`, "COUNT", 1000);
    cursor = next;
    if (keys.length) await client.del(...keys);
  } while (cursor !== "0");
  client.disconnect();
}

// ---------------------------------------------------------------------------------------------
// Processes

export interface Running {
  name: string;
  pid: number;
  podName: string;
  /** The ServiceAccount's username on the API server. */
  username: string;
  /** Each declared port's loopback port, by the port's name. */
  ports: Record<string, number>;
  /** http://127.0.0.1:<port> of a declared port. */
  url(portName: string): string;
  /** http://127.0.0.1:<port> of the port the readiness probe names (the startup probe's without one). */
  readyUrl: string;
  logPath: string;
  logs(): string;
  /** The env it was started with (for tests that check what it got). */
  env: Record<string, string>;
  args: string[];
  exited: Promise<number | null>;
  /** Its exit code or signal when it has ended, else null. */
  exitCodeNow(): number | string | null;
  /** SIGTERM, SIGKILL after the pod's terminationGracePeriodSeconds. */
  stop(): Promise<number | null>;
  /** SIGKILL at once (a node lost, an OOM kill). */
  kill(): Promise<void>;
}

interface PodSpec {
  serviceAccountName?: string;
  terminationGracePeriodSeconds?: number;
  containers: ContainerSpec[];
}

async function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const srv = createServer();
    srv.once("error", fail);
    srv.listen(0, "127.0.0.1", () => {
      const a = srv.address();
      srv.close(() => (typeof a === "object" && a ? done(a.port) : fail(new Error("no port"))));
    });
  });
}

async function readWorkload(cluster: RealCluster, which: ComponentName | SidecarKind) {
  const w = WORKLOADS[which];
  const apps = cluster.kubeConfig().makeApiClient(AppsV1Api);
  const obj =
    w.kind === "Deployment"
      ? await apps.readNamespacedDeployment({ name: w.name, namespace: w.namespace })
      : await apps.readNamespacedStatefulSet({ name: w.name, namespace: w.namespace });
  const pod = obj.spec?.template.spec as unknown as PodSpec;
  const container = pod.containers.find((c) => c.name === w.container);
  if (!container) throw new Error(`${w.kind} ${w.namespace}/${w.name} has no container ${w.container}`);
  return { w, pod, container };
}

/** A kubeconfig with the ServiceAccount's token from TokenRequest, as a projected volume carries it. */
async function serviceAccountKubeconfig(
  cluster: RealCluster,
  namespace: string,
  serviceAccount: string,
  path: string,
): Promise<string> {
  const core = cluster.kubeConfig().makeApiClient(CoreV1Api);
  const issued = await core.createNamespacedServiceAccountToken({
    name: serviceAccount,
    namespace,
    body: { spec: { audiences: [], expirationSeconds: 3600 } },
  });
  const token = issued.status?.token;
  if (!token) throw new Error(`no token for ${namespace}/${serviceAccount}`);
  const user = `system:serviceaccount:${namespace}:${serviceAccount}`;
  await writeFile(
    path,
    stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [
        {
          name: "real",
          cluster: {
            server: cluster.server,
            "certificate-authority-data": Buffer.from(cluster.caPem).toString("base64"),
          },
        },
      ],
      users: [{ name: user, user: { token } }],
      contexts: [{ name: "pod", context: { cluster: "real", user, namespace } }],
      "current-context": "pod",
    }),
    { mode: 0o600 },
  );
  return user;
}

/** What a Secret holds, for the env's secretKeyRefs (the kubelet reads them as the node). */
async function secretsOf(cluster: RealCluster, namespace: string, names: string[]) {
  const core = cluster.kubeConfig().makeApiClient(CoreV1Api);
  const out: Record<string, Record<string, string>> = {};
  for (const name of new Set(names)) {
    const s = await core.readNamespacedSecret({ name, namespace }).catch(() => undefined);
    if (!s) continue;
    out[`${namespace}/${name}`] = Object.fromEntries(
      Object.entries(s.data ?? {}).map(([k, v]) => [k, Buffer.from(v, "base64").toString("utf8")]),
    );
  }
  return out;
}

/**
 * The in-cluster addresses of a container translated to loopback, through its subcommand's own
 * settings: each declared port to a free one (the setting whose default is that port), each listen
 * address to 127.0.0.1. Throws when a declared port has no setting, or more than one.
 */
export async function loopbackTranslation(container: ContainerSpec) {
  const command = container.args?.[0] ?? "";
  const settings = SETTINGS[command];
  if (!settings) throw new Error(`${container.name}: no settings known for subcommand "${command}"`);
  const env: Record<string, string> = {};
  const ports: Record<string, number> = {};
  for (const p of container.ports ?? []) {
    const matches = Object.values(settings).filter(
      (s) => /(^|-)port$/.test(s.flag) && s.default === p.containerPort && s.env,
    );
    if (matches.length !== 1)
      throw new Error(
        `${container.name}: port ${p.name} (${p.containerPort}) is set by ${matches.length} settings`,
      );
    const port = await freePort();
    env[matches[0]!.env!] = String(port);
    ports[p.name ?? String(p.containerPort)] = port;
  }
  for (const s of Object.values(settings)) {
    if (/(^|-)host$/.test(s.flag) && s.env) env[s.env] = "127.0.0.1";
  }
  return { env, ports };
}

export interface StartOptions {
  /** Wait for the container's readiness probe (its startup probe when it has none). Default true. */
  waitReady?: boolean;
  /** More env, for what a test changes on purpose (never what the manifests set). */
  extraEnv?: Record<string, string>;
}

const liveProcesses = new Set<ChildProcess>();
let exitHook = false;

async function startWorkload(
  installed: Installed,
  which: ComponentName | SidecarKind,
  o: StartOptions & { translate?: Record<string, string> } = {},
): Promise<Running> {
  const { cluster } = installed;
  const { w, pod, container } = await readWorkload(cluster, which);
  if (container.command) throw new Error(`${which}: a command overrides the image's entrypoint`);
  const podName =
    w.kind === "StatefulSet" ? `${w.name}-0` : `${w.name}-${randomBytes(4).toString("hex").slice(0, 5)}`;
  const home = await mkdtemp(join(installed.dir, `${which}-`));
  const tmp = join(home, "tmp");
  const bin = join(home, "bin");
  await mkdir(tmp);
  await mkdir(bin);
  // The image has node and no git, kubectl or shell tools a component could lean on.
  await symlink(process.execPath, join(bin, "node"));

  const kubeconfig = join(home, "kubeconfig");
  const username = await serviceAccountKubeconfig(
    cluster,
    w.namespace,
    pod.serviceAccountName ?? "default",
    kubeconfig,
  );
  const secretNames = (container.env ?? [])
    .map((e) => (e as { valueFrom?: { secretKeyRef?: { name: string } } }).valueFrom?.secretKeyRef?.name)
    .filter((n): n is string => Boolean(n));
  const podEnv = containerEnv(container, {
    podName,
    namespace: w.namespace,
    secrets: await secretsOf(cluster, w.namespace, secretNames),
  });
  const { env: loopback, ports } = await loopbackTranslation(container);
  const imageEnv = Object.fromEntries(
    Object.entries(IMAGE.env).map(([k, v]) => [k, v.replace(/^\/tmp$/, tmp)]),
  );
  const env: Record<string, string> = {
    PATH: bin,
    HOSTNAME: podName,
    TMPDIR: tmp,
    ...imageEnv,
    // What the in-cluster ServiceAccount mount gives a pod.
    KUBECONFIG: kubeconfig,
    ...podEnv,
    ...loopback,
    APPLYGATE_REDIS_PREFIX: installed.prefix,
    ...o.translate,
    ...o.extraEnv,
  };
  const [, script, ...entryArgs] = IMAGE.entrypoint;
  const args = [...entryArgs, ...(container.args ?? [])];
  const appScript = resolve(installed.app, relative(IMAGE.workdir, script!));
  const logPath = join(installed.dir, `${which}-${podName}.log`);
  const fd = openSync(logPath, "a");
  const child = spawn(process.execPath, [appScript, ...args], {
    cwd: installed.app,
    env,
    stdio: ["ignore", fd, fd],
  });
  liveProcesses.add(child);
  if (!exitHook) {
    exitHook = true;
    process.once("exit", () => {
      for (const c of liveProcesses) c.kill("SIGKILL");
    });
  }
  const exited = new Promise<number | null>((done) =>
    child.once("exit", (code) => {
      liveProcesses.delete(child);
      done(code);
    }),
  );
  const logs = () => {
    try {
      return readFileSync(logPath, "utf8");
    } catch {
      return "";
    }
  };
  const grace = (pod.terminationGracePeriodSeconds ?? 30) * 1000;
  const probe = container.readinessProbe?.httpGet ?? container.startupProbe?.httpGet;
  const probePort = !probe
    ? undefined
    : typeof probe.port === "string"
      ? ports[probe.port]
      : ports[container.ports?.find((p) => p.containerPort === probe.port)?.name ?? ""];
  const running: Running = {
    name: which,
    pid: child.pid ?? 0,
    podName,
    username,
    ports,
    url: (name) => {
      const port = ports[name];
      if (!port) throw new Error(`${which} declares no port ${name}`);
      return `http://127.0.0.1:${port}`;
    },
    logPath,
    logs,
    env,
    args,
    exited,
    readyUrl: `http://127.0.0.1:${probePort}`,
    exitCodeNow: () => child.exitCode ?? child.signalCode ?? null,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill("SIGTERM");
      const killer = setTimeout(() => child.kill("SIGKILL"), grace);
      const code = await exited;
      clearTimeout(killer);
      return code;
    },
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await exited;
    },
  };
  if (o.waitReady !== false) {
    if (probe) {
      const port = probePort;
      const deadline = Date.now() + READY_TIMEOUT_MS;
      for (;;) {
        if (child.exitCode !== null || child.signalCode !== null)
          throw new Error(
            `${which} exited (${child.exitCode ?? child.signalCode}) before it was ready\n${tail(logs())}`,
          );
        const status = await fetch(`http://127.0.0.1:${port}${probe.path}`, {
          signal: AbortSignal.timeout(3000),
        }).then(
          (r) => r.status,
          () => 0,
        );
        if (status === 200) break;
        if (Date.now() > deadline) {
          await running.kill();
          throw new Error(`${which} not ready: ${probe.path} answers ${status}\n${tail(logs())}`);
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }
  return running;
}

/** Starts the gateway, the worker or the mirror as its Deployment runs it. */
export function startComponent(installed: Installed, which: ComponentName, o: StartOptions = {}) {
  return startWorkload(installed, which, o);
}

/**
 * Starts a sidecar as the applier's workload runs it after the overlay's patch: the Flux one as
 * kustomize-controller's ServiceAccount, the Argo CD one as argocd-application-controller's, the
 * webhook applier as its own Deployment. The webhook applier calls its endpoints on loopback here
 * (in a cluster: a tool's Service address), which its guard refuses unless allowed.
 */
export function startSidecar(installed: Installed, kind: SidecarKind, o: StartOptions = {}) {
  if (!installed.appliers.includes(kind)) throw new Error(`the ${kind} overlay was not installed`);
  return startWorkload(installed, kind, {
    ...o,
    ...(kind === "webhook" ? { translate: { APPLYGATE_WEBHOOK_ALLOW_INTERNAL: "true" } } : {}),
  });
}

/** The username each component runs as, read from the workloads the install stored. */
export async function identitiesOf(
  installed: Installed,
  which: (ComponentName | SidecarKind)[],
): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const c of which) {
    const { w, pod } = await readWorkload(installed.cluster, c);
    out[c] = `system:serviceaccount:${w.namespace}:${pod.serviceAccountName ?? "default"}`;
  }
  return out;
}

/**
 * The local addresses sockets listen on at `port` (from /proc/net/tcp and tcp6): "127.0.0.1" for
 * loopback, "0.0.0.0" or "::" for every address.
 */
export function listeningAddresses(port: number): string[] {
  const out: string[] = [];
  for (const [file, v6] of [
    ["/proc/net/tcp", false],
    ["/proc/net/tcp6", true],
  ] as const) {
    let text = "";
    try {
      text = readFileSync(file, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const [, local, , state] = line.trim().split(/\s+/);
      if (state !== "0A" || !local) continue; // 0A: LISTEN
      const [hex, portHex] = local.split(":");
      if (Number.parseInt(portHex ?? "", 16) !== port || !hex) continue;
      if (!v6) {
        const b = Buffer.from(hex, "hex");
        out.push([b[3], b[2], b[1], b[0]].join("."));
      } else if (/^0+$/.test(hex)) out.push("::");
      else if (hex === "00000000000000000000000001000000") out.push("::1");
      else out.push(hex);
    }
  }
  return out;
}

/** Flux's GitRepository and Kustomization CRDs, read from the flux set's modules in Go's module cache. */
export async function installFluxCrds(cluster: RealCluster): Promise<void> {
  const gomod = readFileSync(join(REPO_ROOT, "test/real/tools/flux/go.mod"), "utf8");
  const version = (module: string) => {
    const m = new RegExp(`^\\s*${module.replace(/[./]/g, "\\$&")}\\s+(v\\S+)`, "m").exec(gomod);
    if (!m) throw new Error(`test/real/tools/flux/go.mod names no ${module}`);
    return m[1]!;
  };
  const cache = process.env.GOMODCACHE || join(process.env.GOPATH || join(homedir(), "go"), "pkg", "mod");
  const files = [
    ["github.com/fluxcd/source-controller", "source.toolkit.fluxcd.io_gitrepositories.yaml"],
    ["github.com/fluxcd/kustomize-controller", "kustomize.toolkit.fluxcd.io_kustomizations.yaml"],
  ].map(([module, file]) => join(cache, `${module}@${version(module!)}`, "config/crd/bases", file!));
  for (const f of files) {
    if (!existsSync(f)) throw new Error(`${f} is not in Go's module cache: run npm run real:build`);
    await kubectlOk(cluster, ["apply", "--server-side", "-f", f]);
  }
  await kubectlOk(cluster, [
    "wait",
    "--for=condition=Established",
    "crd/gitrepositories.source.toolkit.fluxcd.io",
    "crd/kustomizations.kustomize.toolkit.fluxcd.io",
    "--timeout=60s",
  ]);
}

// ---------------------------------------------------------------------------------------------
// The audit log

export interface AuditEvent {
  auditID: string;
  stage: string;
  verb: string;
  requestURI: string;
  userAgent?: string;
  user: { username: string; groups?: string[] };
  objectRef?: {
    resource?: string;
    subresource?: string;
    namespace?: string;
    name?: string;
    apiGroup?: string;
  };
  responseStatus?: { code?: number; message?: string; reason?: string };
}

/** The audit log's events from byte `from` on, and where it ended (JSON lines, one per stage). */
export function readAudit(path: string, from = 0): { events: AuditEvent[]; end: number } {
  const buf = readFileSync(path);
  const text = buf.subarray(from).toString("utf8");
  const complete = text.slice(0, text.lastIndexOf("\n") + 1);
  return {
    events: complete
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as AuditEvent),
    end: from + Buffer.byteLength(complete),
  };
}

export interface ComponentAudit {
  requests: number;
  /** `<verb> <resource>[/<subresource>]` → count. */
  byVerbResource: Record<string, number>;
  /** Each request answered 403: `<verb> <requestURI>: <message>`. */
  forbidden: string[];
  /** Each request answered 422: `<verb> <requestURI>: <message>`. */
  invalid: string[];
}

/**
 * Per component, the requests its identity made (one per auditID: a watch logs a start and an end),
 * counted by verb and resource, and each answered 403 or 422. Pure.
 */
export function auditByComponent(
  events: AuditEvent[],
  identities: Record<string, string>,
  o: {
    /**
     * Our processes' client (client-node sends node-fetch's User-Agent). The Flux sidecar runs as
     * kustomize-controller's ServiceAccount, which real kustomize-controller uses too: only
     * requests with this agent are the sidecar's.
     */
    userAgent?: RegExp;
  } = { userAgent: /^node-fetch\// },
): Record<string, ComponentAudit> {
  const byUser = new Map(Object.entries(identities).map(([c, u]) => [u, c]));
  const last = new Map<string, AuditEvent>();
  for (const e of events)
    if (byUser.has(e.user.username) && (!o.userAgent || o.userAgent.test(e.userAgent ?? "")))
      last.set(e.auditID, e);
  const out: Record<string, ComponentAudit> = {};
  for (const c of Object.keys(identities))
    out[c] = { requests: 0, byVerbResource: {}, forbidden: [], invalid: [] };
  for (const e of last.values()) {
    const a = out[byUser.get(e.user.username)!]!;
    a.requests++;
    const r = e.objectRef;
    const what = r?.resource
      ? `${r.resource}${r.subresource ? `/${r.subresource}` : ""}`
      : e.requestURI.split("?")[0];
    const key = `${e.verb} ${what}`;
    a.byVerbResource[key] = (a.byVerbResource[key] ?? 0) + 1;
    const line = `${e.verb} ${e.requestURI}: ${e.responseStatus?.message ?? ""}`;
    if (e.responseStatus?.code === 403) a.forbidden.push(line);
    if (e.responseStatus?.code === 422) a.invalid.push(line);
  }
  return out;
}

/** One line per refusal: `<component> 403 <verb> <uri>: <message>`. */
export function auditProblems(audit: Record<string, ComponentAudit>): string[] {
  return Object.entries(audit).flatMap(([c, a]) => [
    ...a.forbidden.map((l) => `${c} 403 ${l}`),
    ...a.invalid.map((l) => `${c} 422 ${l}`),
  ]);
}

/** A table of requests per component, for the test's output. */
export function auditTable(audit: Record<string, ComponentAudit>): string {
  return Object.entries(audit)
    .map(([c, a]) => {
      const rows = Object.entries(a.byVerbResource)
        .sort(([x], [y]) => x.localeCompare(y))
        .map(([k, n]) => `    ${String(n).padStart(5)} ${k}`);
      return [`  ${c}: ${a.requests} requests`, ...rows].join("\n");
    })
    .join("\n");
}

/** The kubeconfig of a person or tool identified by a ServiceAccount's token (for tests). */
export async function identityKubeconfig(
  cluster: RealCluster,
  namespace: string,
  serviceAccount: string,
  path: string,
): Promise<string> {
  await mkdir(dirname(path), { recursive: true });
  return serviceAccountKubeconfig(cluster, namespace, serviceAccount, path);
}
