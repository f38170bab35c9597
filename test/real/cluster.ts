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
    throw new Error(`${(err as Error).message}\n--- ${p.logPath} ---\n${logTail(p)}`);
  }
}

export const probeQuietly = (probe: () => Promise<boolean>) => () => probe().catch(() => false);

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

const isPortClash = (p: Proc): boolean => /address already in use/i.test(logTail(p, 200));

export async function startRealCluster(options: RealClusterOptions = {}): Promise<RealCluster> {
  const bins = findRealBinaries(CONTROL_PLANE);
  if (!bins.built) throw new Error(bins.message);
  const timeoutMs = options.readyTimeoutMs ?? 120_000;
  const dir = await clusterDir();
  const procs: Proc[] = [];
  const stop = async (): Promise<void> => {
    for (const p of [...procs].reverse()) {
      if (p.child.exitCode !== null || p.child.signalCode !== null) continue;
      p.child.kill("SIGTERM");
      const killer = setTimeout(() => p.child.kill("SIGKILL"), 15_000);
      await p.exited;
      clearTimeout(killer);
    }
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
    let etcd: Proc | undefined;
    let etcdUrl = "";
    for (let attempt = 1; !etcd; attempt++) {
      const [client, peer] = [await freePort(), await freePort()];
      etcdUrl = `http://${HOST}:${client}`;
      const peerUrl = `http://${HOST}:${peer}`;
      const p = startProcess(
        "etcd",
        bins.path("etcd"),
        [
          "--name=default",
          `--data-dir=${join(dir, "etcd")}`,
          `--listen-client-urls=${etcdUrl}`,
          `--advertise-client-urls=${etcdUrl}`,
          `--listen-peer-urls=${peerUrl}`,
          `--initial-advertise-peer-urls=${peerUrl}`,
          `--initial-cluster=default=${peerUrl}`,
          "--unsafe-no-fsync",
          "--log-level=warn",
        ],
        dir,
      );
      try {
        await readyOrExit(
          p,
          probeQuietly(async () => {
            const res = await fetch(`${etcdUrl}/health`);
            return res.ok && ((await res.json()) as { health?: string }).health === "true";
          }),
          timeoutMs,
        );
        etcd = p;
      } catch (err) {
        if (attempt < 3 && isPortClash(p)) continue;
        procs.push(p);
        throw err;
      }
    }
    procs.push(etcd);
    const etcdReady = Date.now() - t0;

    let apiserver: Proc | undefined;
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
    const apiserverReady = (p: Proc) =>
      readyOrExit(
        p,
        probeQuietly(async () => {
          if (!existsSync(certFile)) return false;
          // The self-signed serving certificate is written followed by its CA: a CA bundle.
          caPem = await readFile(certFile, "utf8");
          const res = await httpsGet(`${server}/readyz`, caPem, adminToken);
          return res.status === 200;
        }),
        timeoutMs,
      );
    for (let attempt = 1; !apiserver; attempt++) {
      const port = await freePort();
      server = `https://${HOST}:${port}`;
      const p = startProcess("kube-apiserver", bins.path("kube-apiserver"), apiserverArgs(port), dir);
      try {
        await apiserverReady(p);
        apiserver = p;
      } catch (err) {
        if (attempt < 3 && isPortClash(p)) continue;
        procs.push(p);
        throw err;
      }
    }
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
        const old = apiserver!;
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
        await apiserverReady(p);
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
