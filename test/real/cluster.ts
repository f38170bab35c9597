// A real control plane on 127.0.0.1 (a stand-in for kind, with no containers): etcd, kube-apiserver
// and kube-controller-manager built by `npm run real:build`, on ephemeral loopback ports.
//
//   const cluster = await startRealCluster();  // prints how long it took to be ready
//   cluster.kubeConfig()                       // client-node, as the cluster admin (system:masters)
//   cluster.kubeconfigPath                     // the same for kubectl and the Go components
//   await cluster.stop();
//
// etcd keeps its data on tmpfs without fsync; kube-apiserver authorizes with RBAC, issues
// ServiceAccount tokens (TokenRequest), knows one static admin token, and writes every request to
// audit.log; kube-controller-manager runs, each under its own ServiceAccount's credentials as
// kubeadm sets it up, the controllers a cluster without nodes needs: garbage collector (Argo CD
// prunes with foreground deletion), namespace (deletion), serviceaccount and its tokens, and
// ClusterRole aggregation (the admin/edit/view roles that CRDs' roles extend).
import { type ChildProcess, spawn } from "node:child_process";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { existsSync, openSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { request } from "node:https";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { stringify } from "yaml";
import { errorMessage } from "../../queue/errors.js";
import { until } from "../support/wait.js";
import { CONTROL_PLANE, findRealBinaries } from "./binaries.js";

const HOST = "127.0.0.1";

export interface RealCluster {
  /** https://127.0.0.1:<port> */
  server: string;
  adminToken: string;
  /** The API server's CA bundle (PEM). */
  caPem: string;
  kubeconfigPath: string;
  auditLogPath: string;
  /** The folder holding data, logs, keys and the kubeconfig (on tmpfs where there is one). */
  dir: string;
  /** Milliseconds from the start of etcd until each part was ready. */
  readyMs: { etcd: number; apiserver: number; controllerManager: number };
  processes: { name: string; pid: number }[];
  kubeConfig: () => KubeConfig;
  /**
   * Stops kube-apiserver and starts it again on the same port, with the same etcd: its watch
   * caches begin anew at etcd's current revision, so a watch from an earlier resourceVersion
   * gets 410 Expired, as after an upgrade or a crash.
   */
  restartApiServer: () => Promise<void>;
  stop: () => Promise<void>;
}

export interface RealClusterOptions {
  /** Keep the folder after stop (its logs and audit.log) for a look. */
  keep?: boolean;
  /** Print the ready line (default true). */
  quiet?: boolean;
  readyTimeoutMs?: number;
  /**
   * More kube-controller-manager controllers (e.g. deployment-controller, replicaset-controller,
   * statefulset-controller: workloads then get their pods, admitted by the API server, never run).
   */
  extraControllers?: string[];
}

/** Every request, with who made it and the answer's code; bodies are left out. */
const AUDIT_POLICY = {
  apiVersion: "audit.k8s.io/v1",
  kind: "Policy",
  omitStages: ["RequestReceived"],
  rules: [{ level: "Metadata" }],
};

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, HOST, () => {
      const address = server.address();
      server.close(() =>
        typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port")),
      );
    });
  });
}

export interface Proc {
  name: string;
  child: ChildProcess;
  logPath: string;
  exited: Promise<number | null>;
}

const running = new Set<ChildProcess>();
let exitHookInstalled = false;

export function startProcess(
  name: string,
  bin: string,
  args: string[],
  dir: string,
  env: NodeJS.ProcessEnv = {},
): Proc {
  const logPath = join(dir, `${name}.log`);
  const fd = openSync(logPath, "a");
  const child = spawn(bin, args, { cwd: dir, stdio: ["ignore", fd, fd], env: { ...process.env, ...env } });
  running.add(child);
  if (!exitHookInstalled) {
    // A test runner that dies must not leave a control plane behind.
    exitHookInstalled = true;
    process.once("exit", () => {
      for (const c of running) c.kill("SIGKILL");
    });
  }
  const exited = new Promise<number | null>((resolve) =>
    child.once("exit", (code) => {
      running.delete(child);
      resolve(code);
    }),
  );
  return { name, child, logPath, exited };
}

export const logTail = (p: Proc, lines = 25): string => {
  try {
    return readFileSync(p.logPath, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
  } catch {
    return "(no log)";
  }
};

/** Waits for `probe`, failing at once (with the log's tail) when the process exits first. */
export async function readyOrExit(p: Proc, probe: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  let exitCode: number | null | undefined;
  void p.exited.then((code) => {
    exitCode = code;
  });
  try {
    await until(
      async () => {
        if (exitCode !== undefined) throw new Error(`${p.name} exited (${exitCode})`);
        return probe();
      },
      `${p.name} to be ready`,
      { timeoutMs, everyMs: 100, retryErrors: false },
    );
  } catch (err) {
    throw new Error(`${errorMessage(err)}\n--- ${p.logPath} ---\n${logTail(p)}`);
  }
}

export const probeQuietly = (probe: () => Promise<boolean>) => () => probe().catch(() => false);

/** SIGTERM, then SIGKILL after `killAfterMs`; nothing for a process that has ended. */
export async function stopProcess(p: Proc, killAfterMs: number): Promise<void> {
  if (p.child.exitCode !== null || p.child.signalCode !== null) return;
  p.child.kill("SIGTERM");
  const killer = setTimeout(() => p.child.kill("SIGKILL"), killAfterMs);
  await p.exited;
  clearTimeout(killer);
}

const isPortClash = (p: Proc): boolean => /address already in use/i.test(logTail(p, 200));

export interface ReadyStart {
  name: string;
  bin: string;
  dir: string;
  env?: NodeJS.ProcessEnv;
  /** How many fresh loopback ports `args` and `ready` are given. */
  ports: number;
  args: (ports: number[]) => string[];
  /** Whether it is ready (an error counts as not yet). */
  ready: (ports: number[], p: Proc) => Promise<boolean>;
  timeoutMs: number;
  /** How long a stop waits after SIGTERM before SIGKILL. */
  killAfterMs: number;
}

/**
 * Starts a process on fresh ports and waits until it is ready; when another process took one of
 * its ports between our look and its bind, again on others (three attempts in all). A process
 * that does not get ready is stopped, and the error thrown names its log's tail.
 */
export async function startReady(o: ReadyStart): Promise<{ proc: Proc; ports: number[] }> {
  for (let attempt = 1; ; attempt++) {
    const ports: number[] = [];
    for (let i = 0; i < o.ports; i++) ports.push(await freePort());
    const p = startProcess(o.name, o.bin, o.args(ports), o.dir, o.env);
    try {
      await readyOrExit(
        p,
        probeQuietly(() => o.ready(ports, p)),
        o.timeoutMs,
      );
      return { proc: p, ports };
    } catch (err) {
      await stopProcess(p, o.killAfterMs);
      if (attempt < 3 && isPortClash(p)) continue;
      throw err;
    }
  }
}

function httpsGet(url: string, ca: string, token: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ca, headers: { authorization: `Bearer ${token}` }, timeout: 5_000 }, (res) => {
      let body = "";
      res.on("data", (c) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", reject);
    req.end();
  });
}

export function kubeconfigYaml(
  server: string,
  caPem: string,
  user: string,
  token: string,
  namespace = "default",
): string {
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      {
        name: "real",
        cluster: { server, "certificate-authority-data": Buffer.from(caPem).toString("base64") },
      },
    ],
    users: [{ name: user, user: { token } }],
    contexts: [{ name: `${user}@real`, context: { cluster: "real", user, namespace } }],
    "current-context": `${user}@real`,
  });
}

/** The folder for a cluster: tmpfs when the machine has one, so etcd never waits on a disk. */
async function clusterDir(): Promise<string> {
  const base = existsSync("/dev/shm") ? "/dev/shm" : tmpdir();
  return mkdtemp(join(base, "applygate-real-"));
}

export async function startRealCluster(options: RealClusterOptions = {}): Promise<RealCluster> {
  const bins = findRealBinaries(CONTROL_PLANE);
  if (!bins.built) throw new Error(bins.message);
  const timeoutMs = options.readyTimeoutMs ?? 120_000;
  const dir = await clusterDir();
  const procs: Proc[] = [];
  const stop = async (): Promise<void> => {
    for (const p of [...procs].reverse()) await stopProcess(p, 15_000);
    if (!options.keep) await rm(dir, { recursive: true, force: true });
  };

  try {
    const t0 = Date.now();
    const adminToken = randomBytes(24).toString("hex");
    const kcmToken = randomBytes(24).toString("hex");
    await writeFile(
      join(dir, "tokens.csv"),
      `${adminToken},admin,admin-uid,"system:masters"\n${kcmToken},system:kube-controller-manager,kcm-uid\n`,
      { mode: 0o600 },
    );
    const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
    await writeFile(join(dir, "sa.key"), privateKey.export({ type: "pkcs8", format: "pem" }), {
      mode: 0o600,
    });
    await writeFile(join(dir, "audit-policy.yaml"), stringify(AUDIT_POLICY));
    await mkdir(join(dir, "pki"));

    // etcd: a port another process grabbed between our look and etcd's bind is retried on others.
    let etcdUrl = "";
    const etcd = await startReady({
      name: "etcd",
      bin: bins.path("etcd"),
      dir,
      ports: 2,
      args: ([client, peer]) => {
        etcdUrl = `http://${HOST}:${client}`;
        const peerUrl = `http://${HOST}:${peer}`;
        return [
          "--name=default",
          `--data-dir=${join(dir, "etcd")}`,
          `--listen-client-urls=${etcdUrl}`,
          `--advertise-client-urls=${etcdUrl}`,
          `--listen-peer-urls=${peerUrl}`,
          `--initial-advertise-peer-urls=${peerUrl}`,
          `--initial-cluster=default=${peerUrl}`,
          "--unsafe-no-fsync",
          "--log-level=warn",
        ];
      },
      ready: async () => {
        const res = await fetch(`${etcdUrl}/health`);
        return res.ok && ((await res.json()) as { health?: string }).health === "true";
      },
      timeoutMs,
      killAfterMs: 15_000,
    });
    procs.push(etcd.proc);
    const etcdReady = Date.now() - t0;

    let server = "";
    let caPem = "";
    const apiserverArgs = (port: number): string[] => [
      `--etcd-servers=${etcdUrl}`,
      `--bind-address=${HOST}`,
      `--advertise-address=${HOST}`,
      `--secure-port=${port}`,
      `--cert-dir=${join(dir, "pki")}`,
      `--token-auth-file=${join(dir, "tokens.csv")}`,
      "--authorization-mode=RBAC",
      "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
      `--service-account-key-file=${join(dir, "sa.key")}`,
      `--service-account-signing-key-file=${join(dir, "sa.key")}`,
      "--service-cluster-ip-range=10.0.0.0/24",
      // No Service traffic flows here; the "kubernetes" Service needs no endpoints.
      "--endpoint-reconciler-type=none",
      `--audit-policy-file=${join(dir, "audit-policy.yaml")}`,
      `--audit-log-path=${join(dir, "audit.log")}`,
      "--audit-log-format=json",
      "--profiling=false",
    ];
    const certFile = join(dir, "pki", "apiserver.crt");
    const apiserverServes = async () => {
      if (!existsSync(certFile)) return false;
      // The self-signed serving certificate is written followed by its CA: a CA bundle.
      caPem = await readFile(certFile, "utf8");
      const res = await httpsGet(`${server}/readyz`, caPem, adminToken);
      return res.status === 200;
    };
    let apiserver = (
      await startReady({
        name: "kube-apiserver",
        bin: bins.path("kube-apiserver"),
        dir,
        ports: 1,
        args: ([port]) => {
          server = `https://${HOST}:${port}`;
          return apiserverArgs(port!);
        },
        ready: apiserverServes,
        timeoutMs,
        killAfterMs: 15_000,
      })
    ).proc;
    procs.push(apiserver);
    const apiserverReadyMs = Date.now() - t0;

    const kubeconfigPath = join(dir, "admin.kubeconfig");
    await writeFile(kubeconfigPath, kubeconfigYaml(server, caPem, "admin", adminToken), { mode: 0o600 });
    const kcmKubeconfig = join(dir, "kube-controller-manager.kubeconfig");
    await writeFile(
      kcmKubeconfig,
      kubeconfigYaml(server, caPem, "system:kube-controller-manager", kcmToken),
      {
        mode: 0o600,
      },
    );
    const kubeConfig = (): KubeConfig => {
      const kc = new KubeConfig();
      kc.loadFromFile(kubeconfigPath);
      return kc;
    };

    const kcm = startProcess(
      "kube-controller-manager",
      bins.path("kube-controller-manager"),
      [
        `--kubeconfig=${kcmKubeconfig}`,
        `--controllers=${[
          "garbage-collector-controller",
          "namespace-controller",
          "serviceaccount-controller",
          "serviceaccount-token-controller",
          "clusterrole-aggregation-controller",
          ...(options.extraControllers ?? []),
        ].join(",")}`,
        "--use-service-account-credentials=true",
        `--service-account-private-key-file=${join(dir, "sa.key")}`,
        "--leader-elect=false",
        "--secure-port=0",
        "--profiling=false",
      ],
      dir,
    );
    procs.push(kcm);
    // Ready when the serviceaccount controller has made the default namespace's ServiceAccount.
    const core = kubeConfig().makeApiClient(CoreV1Api);
    await readyOrExit(
      kcm,
      probeQuietly(async () =>
        Boolean(await core.readNamespacedServiceAccount({ name: "default", namespace: "default" })),
      ),
      timeoutMs,
    );
    const readyMs = { etcd: etcdReady, apiserver: apiserverReadyMs, controllerManager: Date.now() - t0 };
    if (!options.quiet) {
      console.log(
        `real cluster ready in ${(readyMs.controllerManager / 1000).toFixed(1)}s ` +
          `(etcd ${(readyMs.etcd / 1000).toFixed(1)}s, kube-apiserver ${(readyMs.apiserver / 1000).toFixed(1)}s) at ${server}`,
      );
    }
    return {
      server,
      adminToken,
      caPem,
      kubeconfigPath,
      auditLogPath: join(dir, "audit.log"),
      dir,
      readyMs,
      processes: procs.map((p) => ({ name: p.name, pid: p.child.pid ?? 0 })),
      kubeConfig,
      restartApiServer: async () => {
        const old = apiserver;
        // Killed, as in a crash: a graceful stop waits up to a minute for the open watches.
        old.child.kill("SIGKILL");
        await old.exited;
        // The same port and certificates: clients keep their URL, CA and token.
        const p = startProcess(
          "kube-apiserver",
          bins.path("kube-apiserver"),
          apiserverArgs(Number(new URL(server).port)),
          dir,
        );
        procs.splice(procs.indexOf(old), 1, p);
        apiserver = p;
        await readyOrExit(p, probeQuietly(apiserverServes), timeoutMs);
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
