// Argo CD on the real control plane (test/real/cluster.ts): its CRDs and install objects read from
// the argo-cd module in Go's module cache at the version test/real/tools/argocd pins, and the one
// `argocd` binary run as repo-server and as application-controller on 127.0.0.1.
//
//   const argocd = await startRealArgoCD(cluster);   // prints how long it took to be ready
//   await createApplication(cluster.kubeConfig(), argoApplication({ name, repoURL, path }));
//   await argocd.stop();
//
// Installed as manifests/install.yaml would: the CRDs, every ServiceAccount, Role, ClusterRole,
// binding, ConfigMap and Secret it holds (its Deployments, StatefulSet, Services and
// NetworkPolicies are what we run by hand), and the `default` AppProject argocd-server would make.
// The controller runs with its ServiceAccount's token from TokenRequest (ARGOCD_FAKE_IN_CLUSTER
// makes https://kubernetes.default.svc the cluster its KUBECONFIG names); the repo-server holds no
// API credentials, as its install gives it none. Both use a private redis-server, so no other test's
// keys meet theirs.
import { execFile } from "node:child_process";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { ApiextensionsV1Api, CoreV1Api, CustomObjectsApi, type KubeConfig } from "@kubernetes/client-node";
import { parseAllDocuments, stringify } from "yaml";
import { type RestartableRedis, restartableRedis } from "../redis/restartable.js";
import { until } from "../support/wait.js";
import { ARGOCD_BINARIES, findRealBinaries } from "./binaries.js";
import { kubeconfigYaml, logTail, type Proc, type RealCluster, startReady, stopProcess } from "./cluster.js";
import { upstreamModule } from "./upstream.js";

const execFileAsync = promisify(execFile);

export const ARGOCD_NAMESPACE = "argocd";
export const ARGOCD_MODULE = "github.com/argoproj/argo-cd/v3";
const GROUP = "argoproj.io";
const VERSION = "v1alpha1";
const HOST = "127.0.0.1";

/** The install objects we create; the workloads and their network objects we run ourselves. */
const INSTALLED_KINDS = new Set([
  "CustomResourceDefinition",
  "ServiceAccount",
  "Role",
  "ClusterRole",
  "RoleBinding",
  "ClusterRoleBinding",
  "ConfigMap",
  "Secret",
]);

/** The application-controller's settings we vary (its flags). */
export interface ControllerOptions {
  /** --app-resync in seconds (install default 120; 0 turns timed refresh off). */
  appResyncSeconds?: number;
  /** --app-resync-jitter in seconds (default 60: a timed refresh comes up to a minute late). */
  appResyncJitterSeconds?: number;
  /** The controller's --self-heal-timeout-seconds. */
  selfHealTimeoutSeconds?: number;
  /** Namespaces besides argocd whose Applications the controller reconciles (--application-namespaces). */
  applicationNamespaces?: string[];
}

const controllerArgs = (o: ControllerOptions): string[] => [
  ...(o.appResyncSeconds !== undefined ? [`--app-resync=${o.appResyncSeconds}`] : []),
  ...(o.appResyncJitterSeconds !== undefined ? [`--app-resync-jitter=${o.appResyncJitterSeconds}`] : []),
  ...(o.selfHealTimeoutSeconds !== undefined
    ? [`--self-heal-timeout-seconds=${o.selfHealTimeoutSeconds}`]
    : []),
  ...(o.applicationNamespaces?.length
    ? [`--application-namespaces=${o.applicationNamespaces.join(",")}`]
    : []),
];

export interface RealArgoCDOptions extends ControllerOptions {
  /**
   * The repo-server's --revision-cache-expiration in seconds (default 180): a timed refresh
   * compares at a branch's resolution this old; a refresh request resolves it again.
   */
  revisionCacheSeconds?: number;
  /** Entries added to argocd-cm (e.g. `timeout.reconciliation`). */
  argocdCm?: Record<string, string>;
  /** Print the ready line (default true). */
  quiet?: boolean;
  readyTimeoutMs?: number;
}

export interface RealArgoCD {
  namespace: string;
  /** The argo-cd module version whose CRDs and install objects were applied. */
  version: string;
  /** host:port of the repo-server's gRPC endpoint (plaintext). */
  repoServer: string;
  /** The controller's metrics and /healthz (http); it changes when the controller restarts. */
  readonly controllerMetrics: string;
  redisUrl: string;
  /** The controller's own kubeconfig (its ServiceAccount's token). */
  controllerKubeconfigPath: string;
  readyMs: { install: number; repoServer: number; controller: number };
  processes: { name: string; pid: number }[];
  /** The tail of a component's log, for a failing test's message. */
  logTail(name: "argocd-repo-server" | "argocd-application-controller", lines?: number): string;
  controllerOptions(): ControllerOptions;
  /** Stops the controller (SIGTERM) and starts it again with these settings changed. */
  restartController(options: ControllerOptions): Promise<void>;
  stop(): Promise<void>;
}

/** The install objects of manifests/install.yaml we create, CRDs first. */
export function installObjects(installYaml: string): Record<string, any>[] {
  const objects = parseAllDocuments(installYaml)
    .map((d) => d.toJSON() as Record<string, any> | null)
    .filter((o): o is Record<string, any> => Boolean(o && INSTALLED_KINDS.has(o.kind)));
  const crdFirst = (o: Record<string, any>) => (o.kind === "CustomResourceDefinition" ? 0 : 1);
  return objects.sort((a, b) => crdFirst(a) - crdFirst(b));
}

/** The AppProject argocd-server makes at its start (server/server.go initializeDefaultProject). */
export const defaultAppProject = (namespace = ARGOCD_NAMESPACE) => ({
  apiVersion: `${GROUP}/${VERSION}`,
  kind: "AppProject",
  metadata: { name: "default", namespace },
  spec: {
    sourceRepos: ["*"],
    destinations: [{ server: "*", namespace: "*" }],
    clusterResourceWhitelist: [{ group: "*", kind: "*" }],
  },
});

async function kubectl(bin: string, kubeconfig: string, args: string[]): Promise<string> {
  try {
    const { stdout } = await execFileAsync(bin, [`--kubeconfig=${kubeconfig}`, ...args], {
      maxBuffer: 16 * 1024 * 1024,
    });
    return stdout;
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`kubectl ${args.join(" ")}: ${e.stderr || e.message}`);
  }
}

/** A kubeconfig holding a 6 h TokenRequest token of ServiceAccount `name` in argocd. */
export async function serviceAccountKubeconfig(
  cluster: RealCluster,
  name: string,
  file: string,
): Promise<void> {
  const namespace = ARGOCD_NAMESPACE;
  const issued = await cluster
    .kubeConfig()
    .makeApiClient(CoreV1Api)
    .createNamespacedServiceAccountToken({
      name,
      namespace,
      body: { spec: { audiences: [], expirationSeconds: 6 * 3600 } },
    });
  const token = issued.status?.token;
  if (!token) throw new Error(`TokenRequest for ${name} returned no token`);
  await writeFile(file, kubeconfigYaml(cluster.server, cluster.caPem, name, token, namespace), {
    mode: 0o600,
  });
}

export async function startRealArgoCD(
  cluster: RealCluster,
  options: RealArgoCDOptions = {},
): Promise<RealArgoCD> {
  const bins = findRealBinaries(ARGOCD_BINARIES);
  if (!bins.built) throw new Error(bins.message);
  const timeoutMs = options.readyTimeoutMs ?? 120_000;
  const namespace = ARGOCD_NAMESPACE;
  const dir = join(cluster.dir, "argocd");
  const procs: Proc[] = [];
  let redis: RestartableRedis | undefined;
  const stop = async (): Promise<void> => {
    for (const p of [...procs].reverse()) await stopProcess(p, 10_000);
    procs.length = 0;
    await redis?.remove();
    redis = undefined;
  };

  try {
    const t0 = Date.now();
    const argo = upstreamModule("argocd", ARGOCD_MODULE);
    for (const sub of ["home", "tmp", "tls", "ssh", "gnupg", "plugins", "bin"]) {
      await mkdir(join(dir, sub), { recursive: true });
    }
    // The scripts Argo CD's image puts in /usr/local/bin (its Dockerfile); the repo-server runs
    // git-verify-wrapper.sh on every revision it renders. The module cache keeps them read-only
    // and not executable, so they are written, executable, into our run folder.
    for (const script of ["git-verify-wrapper.sh", "gpg-wrapper.sh"]) {
      await writeFile(join(dir, "bin", script), argo.read(`hack/${script}`), { mode: 0o755 });
    }

    // The install objects, each in the argocd namespace (install.yaml names none; its bindings'
    // subjects name argocd), server-side as Argo CD documents for its ApplicationSet CRD.
    const core = cluster.kubeConfig().makeApiClient(CoreV1Api);
    // Already there when applygate's install (test/real/applygate.ts) made it for its Secret.
    await core
      .createNamespace({ body: { metadata: { name: namespace } } })
      .catch((err: { code?: number }) => {
        if (err.code !== 409) throw err;
      });
    const objects = installObjects(argo.read("manifests/install.yaml"));
    const installFile = join(dir, "install.yaml");
    await writeFile(installFile, objects.map((o) => `---\n${stringify(o)}`).join(""));
    const kubectlBin = bins.path("kubectl");
    await kubectl(kubectlBin, cluster.kubeconfigPath, [
      "apply",
      "--server-side",
      "--field-manager=argocd-install",
      `--namespace=${namespace}`,
      `--filename=${installFile}`,
    ]);
    // Polled, not `kubectl wait`: that fails at once on a CRD whose status is not written yet.
    const crds = cluster.kubeConfig().makeApiClient(ApiextensionsV1Api);
    for (const crd of objects.filter((o) => o.kind === "CustomResourceDefinition")) {
      await until(
        async () =>
          (await crds.readCustomResourceDefinition({ name: crd.metadata.name })).status?.conditions?.some(
            (c) => c.type === "Established" && c.status === "True",
          ),
        `CRD ${crd.metadata.name} to be established`,
        { timeoutMs: 60_000, everyMs: 100, retryErrors: true },
      );
    }
    if (options.argocdCm) {
      const cm = await core.readNamespacedConfigMap({ name: "argocd-cm", namespace });
      cm.data = { ...cm.data, ...options.argocdCm };
      await core.replaceNamespacedConfigMap({ name: "argocd-cm", namespace, body: cm });
    }
    await cluster
      .kubeConfig()
      .makeApiClient(CustomObjectsApi)
      .createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace,
        plural: "appprojects",
        body: defaultAppProject(namespace),
      });

    // The controller's identity: its ServiceAccount's token, as a projected token would give it.
    const controllerKubeconfigPath = join(dir, "argocd-application-controller.kubeconfig");
    await serviceAccountKubeconfig(cluster, "argocd-application-controller", controllerKubeconfigPath);
    const installMs = Date.now() - t0;

    redis = await restartableRedis({ persist: false });
    const redisAddress = new URL(redis.url).host;

    // Every path either component writes to lies in our folder (the askpass socket is /tmp's
    // otherwise, shared by every repo-server on the machine).
    const env: NodeJS.ProcessEnv = {
      HOME: join(dir, "home"),
      TMPDIR: join(dir, "tmp"),
      PATH: [join(dir, "bin"), ...bins.dirs, process.env.PATH ?? "/usr/bin:/bin"].join(":"),
      ARGOCD_TLS_DATA_PATH: join(dir, "tls"),
      ARGOCD_SSH_DATA_PATH: join(dir, "ssh"),
      ARGOCD_GNUPGHOME: join(dir, "gnupg"),
      ARGOCD_GPG_DATA_PATH: join(dir, "gnupg"),
      ARGOCD_GPG_ENABLED: "false",
      ARGOCD_ASK_PASS_SOCK: join(dir, "reposerver-ask-pass.sock"),
      ARGOCD_PLUGINSOCKFILEPATH: join(dir, "plugins"),
      KUBECONFIG: "",
    };

    let repoServer = "";
    const repoServerProc = await startReady({
      name: "argocd-repo-server",
      bin: bins.path("argocd-repo-server"),
      dir,
      env,
      ports: 2,
      args: ([port, metricsPort]) => {
        repoServer = `${HOST}:${port}`;
        return [
          `--address=${HOST}`,
          `--port=${port}`,
          `--metrics-address=${HOST}`,
          `--metrics-port=${metricsPort}`,
          "--disable-tls",
          // Its default names a file of the image; with TLS off it must be empty (the check refuses both).
          "--client-ca-path=",
          `--redis=${redisAddress}`,
          "--loglevel=info",
          ...(options.revisionCacheSeconds !== undefined
            ? [`--revision-cache-expiration=${options.revisionCacheSeconds}s`]
            : []),
        ];
      },
      ready: async ([, metricsPort]) => (await fetch(`http://${HOST}:${metricsPort}/healthz?full=true`)).ok,
      timeoutMs,
      killAfterMs: 10_000,
    });
    procs.push(repoServerProc.proc);
    const repoServerMs = Date.now() - t0;

    // The controller's metrics listener binds 0.0.0.0 whatever we ask (controller/appcontroller.go
    // formats "0.0.0.0:%d"); we only ever reach it on 127.0.0.1.
    let controllerMetrics = "";
    let controllerOptions: ControllerOptions = options;
    const startController = async (): Promise<void> => {
      const controller = await startReady({
        name: "argocd-application-controller",
        bin: bins.path("argocd-application-controller"),
        dir,
        env: { ...env, ARGOCD_FAKE_IN_CLUSTER: "true", KUBECONFIG: controllerKubeconfigPath },
        ports: 1,
        args: ([metricsPort]) => {
          controllerMetrics = `http://${HOST}:${metricsPort}`;
          return [
            `--kubeconfig=${controllerKubeconfigPath}`,
            `--namespace=${namespace}`,
            `--repo-server=${repoServer}`,
            "--repo-server-plaintext",
            `--redis=${redisAddress}`,
            `--metrics-port=${metricsPort}`,
            "--loglevel=info",
            ...controllerArgs(controllerOptions),
          ];
        },
        ready: async () => (await fetch(`${controllerMetrics}/healthz`)).ok,
        timeoutMs,
        killAfterMs: 10_000,
      });
      procs.push(controller.proc);
    };
    const stopController = async (): Promise<void> => {
      const p = procs.find((x) => x.name === "argocd-application-controller");
      if (!p) return;
      procs.splice(procs.indexOf(p), 1);
      await stopProcess(p, 10_000);
    };
    await startController();
    const readyMs = { install: installMs, repoServer: repoServerMs, controller: Date.now() - t0 };
    if (!options.quiet) {
      console.log(
        `real Argo CD ${argo.version} ready in ${(readyMs.controller / 1000).toFixed(1)}s ` +
          `(install ${(readyMs.install / 1000).toFixed(1)}s, repo-server ${(readyMs.repoServer / 1000).toFixed(1)}s)`,
      );
    }
    const byName = (name: string) => procs.find((p) => p.name === name);
    return {
      namespace,
      version: argo.version,
      repoServer,
      redisUrl: redis.url,
      controllerKubeconfigPath,
      readyMs,
      processes: procs.map((p) => ({ name: p.name, pid: p.child.pid ?? 0 })),
      get controllerMetrics() {
        return controllerMetrics;
      },
      controllerOptions: () => ({ ...controllerOptions }),
      restartController: async (next) => {
        await stopController();
        controllerOptions = { ...controllerOptions, ...next };
        await startController();
      },
      logTail: (name, lines) => {
        const p = byName(name);
        return p ? logTail(p, lines) : "(not running)";
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

export interface ApplicationSpec {
  name: string;
  /** Where the Application lives (default argocd). */
  namespace?: string;
  repoURL: string;
  path: string;
  targetRevision?: string;
  /** The namespace its objects go to. */
  destinationNamespace: string;
  project?: string;
  syncPolicy?: Record<string, unknown>;
  annotations?: Record<string, string>;
}

/** An Application syncing `path` of a repository (e.g. test/git/server.ts's repoUrl) into this cluster. */
export function argoApplication(spec: ApplicationSpec): Record<string, any> {
  const namespace = spec.namespace ?? ARGOCD_NAMESPACE;
  return {
    apiVersion: `${GROUP}/${VERSION}`,
    kind: "Application",
    metadata: { name: spec.name, namespace, ...(spec.annotations ? { annotations: spec.annotations } : {}) },
    spec: {
      project: spec.project ?? "default",
      destination: { server: "https://kubernetes.default.svc", namespace: spec.destinationNamespace },
      source: { repoURL: spec.repoURL, path: spec.path, targetRevision: spec.targetRevision ?? "main" },
      ...(spec.syncPolicy ? { syncPolicy: spec.syncPolicy } : {}),
    },
  };
}

/** Creates the Application (as whoever `kc` is). */
export async function createApplication(
  kc: KubeConfig,
  app: Record<string, any>,
): Promise<Record<string, any>> {
  return (await kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace: app.metadata.namespace,
    plural: "applications",
    body: app,
  })) as Record<string, any>;
}
