/**
 * `npm run bench -- flux-real`: the fixed cost applygate's held lifecycle adds to one apply of one
 * object, on real kube-apiserver and real Flux (source-controller and kustomize-controller
 * v1.9.6, test/real/flux.ts), next to a plain requestedAt reconcile of an unsuspended
 * Kustomization in the same run.
 *
 * Ours: the Flux sidecar's executor (sidecar/flux, in this process) under kustomize-controller's
 * ServiceAccount token, as the sidecar runs in that pod, with the ClusterRole of manifests/flux
 * bound: one attempt from the send to Succeeded (standing recheck, record on the claim, resume
 * with a token, follow Flux's status to the reconcile's end, suspend again, suspend handled), the
 * commit's artifact fetched beforehand. Plain: `flux reconcile ks` without the source, a
 * requestedAt on an unsuspended Kustomization whose one ConfigMap was edited out of band, until
 * the token is handled with Ready=True (the same build and the apply of one changed object). One
 * of each back to back per run, so a drifting load weighs on both. Needs `npm run real:build`;
 * without it prints why and measures nothing. `FLUX_REAL_BENCH_RUNS` (default 15);
 * `FLUX_REAL_BENCH_OBJECTS` (default 1) objects in the folder, of which each run changes one.
 */

import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { KubeConfig, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { crdFiles } from "../../queue/crds/files.js";
import { Kube } from "../../queue/kube/index.js";
import { GIT_REPOSITORY, KUSTOMIZATION } from "../../sidecar/flux/resources.js";
import { GitAncestry, remoteFromCluster } from "../../sidecar/git-ancestry.js";
import { recheckStanding } from "../../sidecar/standing.js";
import { startGitServer } from "../git/server.js";
import { CONTROL_PLANE, FLUX_BINARIES, findRealBinaries } from "../real/binaries.js";
import { startRealCluster } from "../real/cluster.js";
import { type RealFlux, startRealFlux } from "../real/flux.js";
import { configMap, type Scene, scene, until } from "../sidecar-flux/harness.js";
import type { Figure } from "./figure.js";
import { addedTime, spread } from "./paired.js";
import { median } from "./send-to-apply.js";

const execFileAsync = promisify(execFile);
const RUNS = Number(process.env.FLUX_REAL_BENCH_RUNS ?? 15);
/** Objects in the Kustomization's folder (`FLUX_REAL_BENCH_OBJECTS`, default 1); one of them changes each run. */
const OBJECTS = Number(process.env.FLUX_REAL_BENCH_OBJECTS ?? 1);
/** The object each run changes, and its file. */
const CHANGED = OBJECTS > 1 ? "cm-0" : "app-config";
const CHANGED_FILE = OBJECTS > 1 ? "apps/cm-0.yaml" : "apps/cm.yaml";
const REQUESTED_AT = "reconcile.fluxcd.io/requestedAt";
const SIDECAR_RBAC = fileURLToPath(new URL("../../manifests/flux/rbac.yaml", import.meta.url));

interface Ks {
  status?: {
    lastHandledReconcileAt?: string;
    conditions?: { type: string; status: string }[];
  };
}

/** Makes the source's artifact hold the commit (the held Kustomization applies nothing meanwhile). */
async function prefetch(kube: Kube, s: Scene, commit: string, token: string): Promise<void> {
  await kube.mergePatch(GIT_REPOSITORY, s.ns, "repo", {
    metadata: { annotations: { [REQUESTED_AT]: token } },
  });
  await until(async () => {
    const src = await kube.get<{ metadata: { name: string }; status?: { artifact?: { revision?: string } } }>(
      GIT_REPOSITORY,
      s.ns,
      "repo",
    );
    return src?.status?.artifact?.revision === `main@sha1:${commit}`;
  }, "the fetch");
}

export async function run(): Promise<Figure[]> {
  const bins = findRealBinaries([...CONTROL_PLANE, ...FLUX_BINARIES]);
  if (!bins.built) {
    process.stderr.write(`flux-real: nothing measured, ${bins.message}\n`);
    return [];
  }
  const cluster = await startRealCluster({ quiet: true });
  const git = await startGitServer();
  const cacheDir = await mkdtemp(join(tmpdir(), "flux-real-clones-"));
  const kubes: Kube[] = [];
  let flux: RealFlux | undefined;
  try {
    flux = await startRealFlux(cluster, { quiet: true });
    const kubectl = (...args: string[]) =>
      execFileAsync(bins.path("kubectl"), [`--kubeconfig=${cluster.kubeconfigPath}`, ...args]);
    await kubectl("apply", "--server-side", ...crdFiles().flatMap((f) => ["-f", f]));
    await kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all");
    await kubectl("apply", "--server-side", "-f", SIDECAR_RBAC);

    const kube = new Kube(cluster.kubeConfig());
    const sidecarConfig = new KubeConfig();
    sidecarConfig.loadFromFile(flux.kubeconfigPaths["kustomize-controller"]);
    const executorKube = new Kube(sidecarConfig);
    kubes.push(kube, executorKube);
    const world = { kube, git, clones: new GitAncestry({ cacheDir, remoteFor: remoteFromCluster(kube) }) };

    const objects = OBJECTS > 1 ? { objects: OBJECTS } : {};
    const plain = await scene(world, objects);
    const held = await scene(world, {
      ...objects,
      options: { pollMs: 1000 },
      executorKube,
      checks: { standing: (a) => recheckStanding(executorKube, a) },
    });
    await held.adopt();

    const plainMs: number[] = [];
    const oursMs: number[] = [];
    // The first pair warms up (discovery, connections, caches) uncounted.
    for (let i = -1; i < RUNS; i++) {
      await kube.core.patchNamespacedConfigMap(
        {
          namespace: plain.ns,
          name: CHANGED,
          body: { data: { v: `drift-${i}` } },
          fieldManager: "kubectl-edit",
        },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      );
      const token = `plain-${i}`;
      const t0 = performance.now();
      await kube.mergePatch(KUSTOMIZATION, plain.ns, "apps", {
        metadata: { annotations: { [REQUESTED_AT]: token } },
      });
      await until(async () => {
        const ks = await kube.get<Ks & { metadata: { name: string } }>(KUSTOMIZATION, plain.ns, "apps");
        const ready = ks?.status?.conditions?.find((c) => c.type === "Ready");
        return ks?.status?.lastHandledReconcileAt === token && ready?.status === "True";
      }, "the plain reconcile");
      const plainRun = performance.now() - t0;
      if ((await plain.configValue(CHANGED)) !== "1")
        throw new Error("the plain reconcile did not revert the edit");

      const commit = await held.push({ [CHANGED_FILE]: configMap(CHANGED, `o${i}`) });
      await prefetch(kube, held, commit, `fetch-${i}`);
      const t1 = performance.now();
      const r = await held.run(held.attempt(commit));
      const oursRun = performance.now() - t1;
      if (r.last.phase !== "Succeeded") throw new Error(`operation ended ${r.last.phase} (${r.last.reason})`);
      if ((await held.configValue(CHANGED)) !== `o${i}`)
        throw new Error("the operation did not apply the commit");
      if (i < 0) continue;
      plainMs.push(plainRun);
      oursMs.push(oursRun);
    }
    const base = median(plainMs);
    const ours = median(oursMs);
    const note =
      `real kube-apiserver, source-controller ${flux.versions["source-controller"]}, kustomize-controller ` +
      `${flux.versions["kustomize-controller"]}; ${OBJECTS} object${OBJECTS > 1 ? "s" : ""}, ${RUNS} runs (a plain reconcile and an operation back to ` +
      `back in each), load average ${loadavg()[0]!.toFixed(1)} on ${availableParallelism()} cores at the end`;
    return [
      {
        bench: `flux-real.apply.held.${OBJECTS}`,
        value: Math.round(ours),
        unit: "ms",
        baseline: Math.round(base),
        ratio: Number((ours / base).toFixed(2)),
        note: `${note}; ours: attempt to Succeeded, artifact fetched beforehand, ${spread(oursMs)}; baseline: requestedAt on an unsuspended Kustomization reverting one edited ConfigMap of ${OBJECTS}, ${spread(plainMs)}`,
      },
      addedTime(`flux-real.apply.fixed-cost.${OBJECTS}`, oursMs, plainMs, note, "plain reconcile"),
    ];
  } finally {
    for (const k of kubes) await k.close();
    await flux?.stop();
    await cluster.stop();
    await git.close();
    await rm(cacheDir, { recursive: true, force: true });
  }
}
