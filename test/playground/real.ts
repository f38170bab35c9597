/**
 * `applygate playground --real` (`npm start -- --real`): the playground on the real components the
 * real tier builds (`npm run real:build`): kube-apiserver, etcd and kube-controller-manager on
 * loopback, real Flux and real Argo CD, applygate installed from its overlays and run as deployed
 * (test/real/applygate.ts), and one namespace whose repository both appliers apply through
 * applygate. Without the binaries it says in one line how to build them.
 */
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { objectPath, objectYaml } from "../../queue/git/layout.js";
import { resolveEmbeddedRedis } from "../../queue/redis.js";
import { type GitServer, startGitServer } from "../git/server.js";
import {
  deleteInstallKeys,
  type Installed,
  installApplygate,
  kubectl,
  type Running,
  startComponent,
  startSidecar,
} from "../real/applygate.js";
import { ARGOCD_NAMESPACE, type RealArgoCD, startRealArgoCD } from "../real/argocd.js";
import { ARGOCD_BINARIES, CONTROL_PLANE, FLUX_BINARIES, findRealBinaries } from "../real/binaries.js";
import { type RealCluster, startRealCluster } from "../real/cluster.js";
import { FLUX_NAMESPACE, type RealFlux, startRealFlux } from "../real/flux.js";
import {
  gitProviderYaml,
  gitTargetYaml,
  heldYaml,
  secretAccessBindings,
  secretYaml,
  webhookPathOf,
} from "../real/tenant.js";
import { ensureRedisServer } from "../redis/install.js";
import { untilWith } from "../support/wait.js";

const NAMESPACE = "demo";
/** The Kustomization (in flux-system) and the Application (in argocd) are named after the namespace. */
const APPLIER = NAMESPACE;
const FOLDERS = { flux: "apps/flux", argocd: "apps/argocd" } as const;

const until = untilWith({ timeoutMs: 300_000, everyMs: 200, retryErrors: true });

/** Where the ConfigMap `name` each applier applies stands in the repository's layout. */
const configMapPath = (folder: string, name: string) =>
  objectPath(folder, { apiVersion: "v1", kind: "ConfigMap", namespace: NAMESPACE, name });

/** The ConfigMap each applier applies, in the repository's layout. */
function configMapFile(folder: string, name: string, greeting: string): [string, string] {
  return [
    configMapPath(folder, name),
    objectYaml({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name, namespace: NAMESPACE },
      data: { greeting },
    }),
  ];
}

/** Flux's source and Kustomization and Argo CD's Application for the demo repository, each held by a claim. */
function appliersYaml(repoUrl: string): string {
  const claim = (kind: "FluxClaim" | "ArgoCDClaim", applierNamespace: string, name: string) =>
    heldYaml(NAMESPACE, applierNamespace, kind).replace("name: web,", `name: ${name},`);
  return [
    `apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: ${APPLIER}, namespace: ${FLUX_NAMESPACE}}
spec: {interval: 1m, url: "${repoUrl}", ref: {branch: main}}
`,
    `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: ${APPLIER}, namespace: ${FLUX_NAMESPACE}}
spec: {interval: 1m, prune: true, path: ./${FOLDERS.flux}, sourceRef: {kind: GitRepository, name: ${APPLIER}}}
`,
    claim("FluxClaim", FLUX_NAMESPACE, "flux-app"),
    `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: ${APPLIER}, namespace: ${ARGOCD_NAMESPACE}}
spec:
  project: default
  source: {repoURL: "${repoUrl}", targetRevision: main, path: ${FOLDERS.argocd}, directory: {recurse: true}}
  destination: {server: "https://kubernetes.default.svc", namespace: ${NAMESPACE}}
  syncPolicy: {automated: {prune: true, selfHeal: false}}
`,
    claim("ArgoCDClaim", ARGOCD_NAMESPACE, "argo-app"),
  ].join("---\n");
}

interface Started {
  cluster?: RealCluster;
  git?: GitServer;
  installed?: Installed;
  running: Running[];
  flux?: RealFlux;
  argocd?: RealArgoCD;
  stops: Array<() => Promise<unknown>>;
}

async function stopAll(s: Started): Promise<void> {
  for (const stop of s.stops.splice(0).reverse()) await stop().catch(() => {});
}

export async function runReal(say: (line: string) => void, stopAsked: Promise<unknown>): Promise<number> {
  const bins = findRealBinaries([...CONTROL_PLANE, ...FLUX_BINARIES, ...ARGOCD_BINARIES]);
  if (!bins.built) {
    process.stderr.write(`applygate playground --real: ${bins.message}\n`);
    return 1;
  }
  // kubectl as built with the control plane, before any other on the PATH.
  process.env.PATH = [...bins.dirs, process.env.PATH ?? "/usr/bin:/bin"].join(":");
  const s: Started = { running: [], stops: [] };
  const t0 = Date.now();
  const step = (what: string) => say(`  ${((Date.now() - t0) / 1000).toFixed(1).padStart(5)} s  ${what}`);
  try {
    say("starting the real components (Ctrl-C stops everything):");
    const redis = await resolveEmbeddedRedis(process.env, { ensureServer: ensureRedisServer });
    s.stops.push(() => redis.stop());
    const cluster = await startRealCluster({ quiet: true });
    s.cluster = cluster;
    s.stops.push(() => cluster.stop());
    step("kube-apiserver, etcd and kube-controller-manager ready");
    const git = await startGitServer({ root: join(cluster.dir, "git") });
    s.stops.push(() => git.close());
    const installed = await installApplygate(cluster, { redisUrl: redis.url, appliers: ["flux", "argocd"] });
    s.stops.push(() => deleteInstallKeys(installed));
    step("applygate installed (kubectl apply -k of its overlays)");
    const run = async (r: Promise<Running>) => {
      const started = await r;
      s.stops.push(() => started.stop());
      s.running.push(started);
    };
    for (const c of ["gateway", "worker"] as const) await run(startComponent(installed, c));
    step("gateway and worker running as deployed");
    const flux = await startRealFlux(cluster, { quiet: true });
    s.stops.push(() => flux.stop());
    step("source-controller and kustomize-controller ready");
    const argocd = await startRealArgoCD(cluster, { quiet: true });
    s.stops.push(() => argocd.stop());
    step("Argo CD's repo-server and application-controller ready");
    for (const k of ["flux", "argocd"] as const) await run(startSidecar(installed, k));
    step("the Flux and Argo CD sidecars running beside them");

    const hookToken = randomBytes(12).toString("hex");
    const intakeToken = randomBytes(12).toString("hex");
    const repoUrl = await git.createRepo(
      NAMESPACE,
      Object.fromEntries([
        configMapFile(FOLDERS.flux, "flux-app", "hello"),
        configMapFile(FOLDERS.argocd, "argo-app", "hello"),
      ]),
    );
    const ok = async (args: string[], input?: string) => {
      const r = await kubectl(cluster, args, input === undefined ? {} : { input });
      if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${r.err}`);
    };
    await ok(["create", "namespace", NAMESPACE]);
    for (const args of secretAccessBindings(NAMESPACE)) await ok(args);
    await ok(
      ["apply", "-f", "-"],
      [
        secretYaml(NAMESPACE, "hook", { token: hookToken }),
        secretYaml(NAMESPACE, "intake", { token: intakeToken }),
        gitProviderYaml(NAMESPACE, repoUrl),
        gitTargetYaml(NAMESPACE, {
          name: "flux-app",
          folder: FOLDERS.flux,
          claim: { kind: "FluxClaim", name: "flux-app" },
          intake: true,
        }),
        gitTargetYaml(NAMESPACE, {
          name: "argo-app",
          folder: FOLDERS.argocd,
          claim: { kind: "ArgoCDClaim", name: "argo-app" },
          intake: true,
        }),
        appliersYaml(repoUrl),
      ].join("---\n"),
    );
    const webhookPath = await until(
      () => webhookPathOf(cluster.kubeConfig().makeApiClient(CustomObjectsApi), NAMESPACE),
      "the gateway to give the GitProvider its webhook path",
    );
    const gateway = s.running[0] as Running;
    const unhook = git.addWebhook({ url: `${gateway.url("http")}${webhookPath}`, secret: hookToken });
    s.stops.push(async () => unhook());
    const core = cluster.kubeConfig().makeApiClient(CoreV1Api);
    for (const name of ["flux-app", "argo-app"])
      await until(
        async () =>
          (await core.readNamespacedConfigMap({ namespace: NAMESPACE, name })).data?.greeting === "hello",
        `${name} applied`,
      );
    step("the demo repository applied by both, each held by its claim");

    say(
      [
        "",
        "applygate playground --real is running",
        "",
        `  Cluster      export KUBECONFIG=${cluster.kubeconfigPath}  (real kube-apiserver; you are admin)`,
        `  Git          ${repoUrl}  (branch main; each push is delivered to the gateway)`,
        `  Gateway      ${gateway.url("http")}`,
        `  Redis        ${redis.url}`,
        `  Logs         ${cluster.dir}  (every component's log, the API server's audit.log)`,
        "",
        "Try:",
        `  export KUBECONFIG=${cluster.kubeconfigPath}`,
        "  kubectl get fluxclaims,argocdclaims,gittargets -n demo",
        `  git clone ${repoUrl} demo && cd demo`,
        `    edit ${configMapPath(FOLDERS.flux, "flux-app")} (or the argocd one), then git commit -am edit && git push`,
        "    (real Flux or real Argo CD applies it once, through applygate)",
        "  kubectl get kustomization -n flux-system demo -o jsonpath='{.status.lastAppliedRevision}'",
        "  kubectl get application -n argocd demo -o jsonpath='{.status.operationState.syncResult.revision}'",
        "",
        "Ctrl-C stops everything.",
        "",
      ].join("\n"),
    );
    await stopAsked;
    say("\nstopping…");
    return 0;
  } finally {
    await stopAll(s);
  }
}
