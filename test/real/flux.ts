// Real Flux on the real control plane (test/real/cluster.ts): source-controller and
// kustomize-controller built by `npm run real:build`, installed as Flux installs them.
//
//   const flux = await startRealFlux(cluster);   // prints how long it took to be ready
//   await createGitSource(cluster.kubeConfig(), { namespace, url, path: "./apps" });
//   await flux.stop();
//
// The CRDs and the controllers' RBAC are read from the Go module cache at the versions
// test/real/tools/flux pins (go.mod, checked against go.sum), never from a copy in this
// repository. Each controller runs under its own ServiceAccount in flux-system with a token from
// TokenRequest, its own loopback metrics, health and (source-controller) artifact ports, its
// storage under the cluster's folder, watching every namespace, leader election off.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from "@kubernetes/client-node";
import { parseAllDocuments, stringify } from "yaml";
import { FLUX_BINARIES, findRealBinaries } from "./binaries.js";
import { kubeconfigYaml, type Proc, type RealCluster, startReady, stopProcess } from "./cluster.js";
import { type UpstreamModule, upstreamModule } from "./upstream.js";

const execFileAsync = promisify(execFile);
const HOST = "127.0.0.1";
export const FLUX_NAMESPACE = "flux-system";
const TOOL_SET = "flux";
const SOURCE_MODULE = "github.com/fluxcd/source-controller";
const KUSTOMIZE_MODULE = "github.com/fluxcd/kustomize-controller";
const NOTIFICATION_MODULE = "github.com/fluxcd/notification-controller";

export type FluxController = "source-controller" | "kustomize-controller";

export interface RealFluxOptions {
  /** Print the ready line (default true). */
  quiet?: boolean;
  readyTimeoutMs?: number;
  /** kustomize-controller --requeue-dependency (upstream 30s): how soon a held-back dependent looks again. */
  requeueDependency?: string;
}

export interface RealFlux {
  namespace: string;
  /** Module versions the binaries were built from (the go.mod pins). */
  versions: Record<FluxController, string>;
  /** Each controller's log (JSON lines), for tests that read what it did. */
  logPaths: Record<FluxController, string>;
  /**
   * Each controller's kubeconfig (its ServiceAccount's token): applygate's Flux sidecar runs in
   * kustomize-controller's pod, under kustomize-controller's ServiceAccount.
   */
  kubeconfigPaths: Record<FluxController, string>;
  /** The artifact server's base URL, as source-controller advertises it. */
  storageUrl: string;
  /** Milliseconds from the start of the install until both controllers ran their workers. */
  readyMs: number;
  processes: { name: string; pid: number }[];
  stop: () => Promise<void>;
}

/** The CRD files of a Flux module (config/crd/bases), in the module cache. */
const crdFiles = (mod: UpstreamModule): string[] => {
  const kustomization = parseAllDocuments(mod.read("config/crd/kustomization.yaml"))[0]?.toJSON() as {
    resources: string[];
  };
  return kustomization.resources.map((r) => join(mod.dir, "config/crd", r));
};

/**
 * The controller's own RBAC (config/rbac, rendered by kustomize as its install renders it), bound
 * to our ServiceAccount in flux-system instead of kubebuilder's placeholder `system/default`. For
 * kustomize-controller that includes cluster-admin (its `cluster-reconciler` binding), as Flux's
 * install gives it: it applies whatever a Kustomization holds.
 */
export async function controllerRbac(kubectl: string, mod: UpstreamModule, serviceAccount: string) {
  const { stdout } = await execFileAsync(kubectl, ["kustomize", join(mod.dir, "config/rbac")], {
    maxBuffer: 16 * 1024 * 1024,
  });
  return parseAllDocuments(stdout).map((doc) => {
    const obj = doc.toJSON() as {
      kind: string;
      metadata: { namespace?: string };
      subjects?: { kind: string; name: string; namespace?: string }[];
    };
    if (obj.kind === "Role" || obj.kind === "RoleBinding") obj.metadata.namespace = FLUX_NAMESPACE;
    for (const s of obj.subjects ?? []) {
      if (s.kind === "ServiceAccount") {
        s.name = serviceAccount;
        s.namespace = FLUX_NAMESPACE;
      }
    }
    return obj;
  });
}

export async function kubectlApply(kubectl: string, kubeconfig: string, args: string[], input?: string) {
  const child = execFileAsync(
    kubectl,
    [`--kubeconfig=${kubeconfig}`, "apply", "--server-side", "--field-manager=flux-install", ...args],
    { maxBuffer: 16 * 1024 * 1024 },
  );
  if (input !== undefined) child.child.stdin?.end(input);
  await child;
}

/** A token for the ServiceAccount (TokenRequest) and a kubeconfig holding it. */
export async function serviceAccountKubeconfig(
  cluster: RealCluster,
  name: string,
  file: string,
): Promise<void> {
  const core = cluster.kubeConfig().makeApiClient(CoreV1Api);
  const issued = await core.createNamespacedServiceAccountToken({
    name,
    namespace: FLUX_NAMESPACE,
    body: { spec: { audiences: [], expirationSeconds: 24 * 3600 } },
  });
  const token = issued.status?.token;
  if (!token) throw new Error(`no token issued for ${FLUX_NAMESPACE}/${name}`);
  const user = `system:serviceaccount:${FLUX_NAMESPACE}:${name}`;
  await writeFile(file, kubeconfigYaml(cluster.server, cluster.caPem, user, token), { mode: 0o600 });
}

/**
 * A Flux controller as Flux's install runs it: under its ServiceAccount in flux-system (a
 * TokenRequest token), leader election off, watching every namespace, JSON logs, on fresh loopback
 * ports (metrics and health first, then those of `args`); ready once it answers /readyz and
 * `controller`'s workers run.
 */
export async function startFluxController(
  cluster: RealCluster,
  o: {
    name: string;
    bin: string;
    dir: string;
    ports: number;
    args: (ports: number[]) => string[];
    controller: string;
    timeoutMs: number;
  },
): Promise<{ proc: Proc; ports: number[] }> {
  const kubeconfig = join(o.dir, `${o.name}.kubeconfig`);
  await serviceAccountKubeconfig(cluster, o.name, kubeconfig);
  return startReady({
    name: o.name,
    bin: o.bin,
    dir: o.dir,
    env: { KUBECONFIG: kubeconfig, RUNTIME_NAMESPACE: FLUX_NAMESPACE },
    ports: o.ports,
    args: (ports) => [
      `--metrics-addr=${HOST}:${ports[0]}`,
      `--health-addr=${HOST}:${ports[1]}`,
      "--enable-leader-election=false",
      "--watch-all-namespaces=true",
      "--log-encoding=json",
      "--log-level=info",
      ...o.args(ports),
    ],
    ready: async (ports, p) => {
      const res = await fetch(`http://${HOST}:${ports[1]}/readyz`);
      return res.ok && (await workersStarted(p.logPath, o.controller)());
    },
    timeoutMs: o.timeoutMs,
    killAfterMs: 15_000,
  });
}

/** True once controller-runtime logged that `controller`'s workers run (its caches synced). */
export const workersStarted = (logPath: string, controller: string) => async (): Promise<boolean> => {
  const text = await readFile(logPath, "utf8");
  return text
    .split("\n")
    .some((line) => line.includes('"Starting workers"') && line.includes(`"controller":"${controller}"`));
};

export async function startRealFlux(cluster: RealCluster, options: RealFluxOptions = {}): Promise<RealFlux> {
  const bins = findRealBinaries(FLUX_BINARIES);
  if (!bins.built) throw new Error(bins.message);
  const timeoutMs = options.readyTimeoutMs ?? 120_000;
  const t0 = Date.now();
  const source = upstreamModule(TOOL_SET, SOURCE_MODULE);
  const kustomize = upstreamModule(TOOL_SET, KUSTOMIZE_MODULE);
  const notification = upstreamModule(TOOL_SET, NOTIFICATION_MODULE);
  const kubectl = bins.path("kubectl");
  const admin = cluster.kubeconfigPath;
  const dir = join(cluster.dir, "flux");
  await mkdir(join(dir, "artifacts"), { recursive: true });

  // CRDs, then wait until they serve (a controller starting before would fail its informers).
  const crds = [...crdFiles(source), ...crdFiles(kustomize), ...crdFiles(notification)];
  await kubectlApply(
    kubectl,
    admin,
    crds.flatMap((f) => ["-f", f]),
  );
  const crdNames = crds.map((f) => {
    const crd = parseAllDocuments(readFileSync(f, "utf8"))[0]?.toJSON() as { metadata?: { name?: string } };
    if (!crd?.metadata?.name) throw new Error(`${f} holds no CRD`);
    return crd.metadata.name;
  });
  await execFileAsync(kubectl, [
    `--kubeconfig=${admin}`,
    "wait",
    "--for=condition=Established",
    "--timeout=60s",
    ...crdNames.map((n) => `crd/${n}`),
  ]);

  const install = [
    { apiVersion: "v1", kind: "Namespace", metadata: { name: FLUX_NAMESPACE } },
    ...(["source-controller", "kustomize-controller"] as const).map((name) => ({
      apiVersion: "v1",
      kind: "ServiceAccount",
      metadata: { name, namespace: FLUX_NAMESPACE },
    })),
    ...(await controllerRbac(kubectl, source, "source-controller")),
    ...(await controllerRbac(kubectl, kustomize, "kustomize-controller")),
  ];
  await kubectlApply(kubectl, admin, ["-f", "-"], install.map((o) => stringify(o)).join("---\n"));

  const procs: Proc[] = [];
  const stop = async (): Promise<void> => {
    for (const p of [...procs].reverse()) await stopProcess(p, 15_000);
  };
  const launch = async (
    name: FluxController,
    args: (ports: number[]) => string[],
    ports: number,
    controller: string,
  ) =>
    (
      await startFluxController(cluster, {
        name,
        bin: bins.path(name),
        dir,
        ports,
        args,
        controller,
        timeoutMs,
      })
    ).proc;

  try {
    let storageUrl = "";
    const src = await launch(
      "source-controller",
      (ports) => {
        storageUrl = `http://${HOST}:${ports[2]}`;
        return [
          `--storage-path=${join(dir, "artifacts")}`,
          `--storage-addr=${HOST}:${ports[2]}`,
          `--storage-adv-addr=${HOST}:${ports[2]}`,
        ];
      },
      3,
      "gitrepository",
    );
    procs.push(src);
    const ks = await launch(
      "kustomize-controller",
      () => (options.requeueDependency ? [`--requeue-dependency=${options.requeueDependency}`] : []),
      2,
      "kustomization",
    );
    procs.push(ks);
    const readyMs = Date.now() - t0;
    const versions = { "source-controller": source.version, "kustomize-controller": kustomize.version };
    if (!options.quiet) {
      console.log(
        `real Flux ready in ${(readyMs / 1000).toFixed(1)}s (source-controller ${versions["source-controller"]}, ` +
          `kustomize-controller ${versions["kustomize-controller"]}; CRDs and RBAC from the module cache)`,
      );
    }
    return {
      namespace: FLUX_NAMESPACE,
      versions,
      logPaths: { "source-controller": src.logPath, "kustomize-controller": ks.logPath },
      kubeconfigPaths: {
        "source-controller": join(dir, "source-controller.kubeconfig"),
        "kustomize-controller": join(dir, "kustomize-controller.kubeconfig"),
      },
      storageUrl,
      readyMs,
      processes: procs.map((p) => ({ name: p.name, pid: p.child.pid ?? 0 })),
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

// ---- a GitRepository and a Kustomization over our Git server -----------------------------------

export const GIT_REPOSITORIES = {
  group: "source.toolkit.fluxcd.io",
  version: "v1",
  plural: "gitrepositories",
};
export const KUSTOMIZATIONS = {
  group: "kustomize.toolkit.fluxcd.io",
  version: "v1",
  plural: "kustomizations",
};

export interface GitSourceSpec {
  namespace: string;
  /** The repository's clone URL on our Git server (test/git/server.ts, on 127.0.0.1). */
  url: string;
  /** Name of both objects (default "apps"). */
  name?: string;
  branch?: string;
  /** Folder of the repository the Kustomization applies (default "./"). */
  path?: string;
  /** Both objects' interval (default "100h": nothing but a change or a request reconciles them). */
  interval?: string;
  prune?: boolean;
  suspend?: boolean;
  targetNamespace?: string;
}

/** The GitRepository and Kustomization of a folder of a branch, as `flux create` would write them. */
export function gitSourceObjects(spec: GitSourceSpec) {
  const name = spec.name ?? "apps";
  const interval = spec.interval ?? "100h";
  const gitRepository = {
    apiVersion: "source.toolkit.fluxcd.io/v1",
    kind: "GitRepository",
    metadata: { name, namespace: spec.namespace },
    spec: { interval, url: spec.url, ref: { branch: spec.branch ?? "main" } },
  };
  const kustomization = {
    apiVersion: "kustomize.toolkit.fluxcd.io/v1",
    kind: "Kustomization",
    metadata: { name, namespace: spec.namespace },
    spec: {
      interval,
      path: spec.path ?? "./",
      prune: spec.prune ?? true,
      sourceRef: { kind: "GitRepository", name },
      ...(spec.suspend ? { suspend: true } : {}),
      ...(spec.targetNamespace ? { targetNamespace: spec.targetNamespace } : {}),
    },
  };
  return { gitRepository, kustomization };
}

/** Creates the GitRepository and Kustomization of `gitSourceObjects` (the namespace must exist). */
export async function createGitSource(kubeConfig: KubeConfig, spec: GitSourceSpec) {
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  const { gitRepository, kustomization } = gitSourceObjects(spec);
  await custom.createNamespacedCustomObject({
    ...GIT_REPOSITORIES,
    namespace: spec.namespace,
    body: gitRepository,
  });
  await custom.createNamespacedCustomObject({
    ...KUSTOMIZATIONS,
    namespace: spec.namespace,
    body: kustomization,
  });
  return { gitRepository, kustomization };
}
