/**
 * `npm run bench -- argocd-real`: one Argo CD sync through applygate, send → sync started →
 * Succeeded, on real kube-apiserver and real Argo CD (repo-server and application-controller,
 * test/real/argocd.ts), next to the sync a user starts by hand (`argocd app sync`: an `operation`
 * written on an KObject) in the same run.
 *
 * Ours: the Argo CD sidecar's executor (sidecar/argocd, in this process) under the
 * application-controller's ServiceAccount token with the ClusterRole of manifests/argocd bound, as
 * the sidecar runs in that pod: the standing recheck, the operation recorded on the claim, the sync
 * update, Argo CD's run of it, and the executor seeing it end. "Started" is the first read of the
 * Application that shows Argo CD running the operation (`status.operationState.phase` Running, or
 * already Succeeded, at the commit); reads every 10 ms, from the admin's client, for both. Plain: the
 * same operation written by the admin on an Application no claim holds, until Argo CD reports it
 * Succeeded. Each run commits one changed ConfigMap to each Application's folder, and runs one of
 * each back to back, so a drifting load weighs on both. Needs `npm run real:build`; without it prints
 * why and measures nothing. `ARGOCD_REAL_BENCH_RUNS` (default 15).
 */

import { execFile } from "node:child_process";
import { availableParallelism, loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { KubeConfig } from "@kubernetes/client-node";
import { crdFiles } from "../../queue/crds/files.js";
import { type KObject, Kube, operationStateOf, RESOURCES } from "../../queue/kube/index.js";
import { createLogger } from "../../queue/log.js";
import { APPLICATION } from "../../sidecar/argocd/application.js";
import { ArgoCDExecutor } from "../../sidecar/argocd/executor.js";
import { memoryEvents } from "../../sidecar/events.js";
import { GitPeer } from "../git/peer.js";
import { startGitServer } from "../git/server.js";
import { argoApplication, type RealArgoCD, startRealArgoCD } from "../real/argocd.js";
import { ARGOCD_BINARIES, CONTROL_PLANE, findRealBinaries } from "../real/binaries.js";
import { startRealCluster } from "../real/cluster.js";
import { inControlStatus } from "../support/claims.js";
import { unrecordedChecks } from "../support/safety-checks.js";
import { attemptFor, configMapYaml, createTarget, recorder, until } from "../support/sidecar-world.js";
import type { Figure } from "./figure.js";
import { addedTime, spread } from "./paired.js";
import { median } from "./send-to-apply.js";

const execFileAsync = promisify(execFile);
const RUNS = Number(process.env.ARGOCD_REAL_BENCH_RUNS ?? 15);
const SIDECAR_RBAC = fileURLToPath(new URL("../../manifests/argocd/rbac.yaml", import.meta.url));
const NS = "argocd";
/** How often the Application is read while a sync is timed (the figures' resolution). */
const READ_MS = 10;

/** The operation of `commit` as Argo CD reports it on the Application: Running, Succeeded, … */
const phaseAt = (app: KObject | undefined, commit: string): string | undefined => {
  const op = operationStateOf(app);
  const revision = op?.operation?.sync?.revision ?? op?.syncResult?.revision;
  return revision === commit ? op?.phase : undefined;
};

/**
 * Reads the Application every READ_MS from `t0` until Argo CD reports the operation of `commit`
 * Succeeded; returns when it was first seen started (Running or later) and Succeeded, in ms after
 * `t0`.
 */
async function follow(
  kube: Kube,
  name: string,
  commit: string,
  t0: number,
  stop: { done: boolean },
): Promise<{ started: number; succeeded: number }> {
  let started = Number.NaN;
  for (;;) {
    const phase = phaseAt(await kube.get(APPLICATION, NS, name), commit);
    const at = performance.now() - t0;
    if (phase && Number.isNaN(started)) started = at;
    if (phase === "Succeeded") return { started, succeeded: at };
    if (phase === "Failed" || phase === "Error")
      throw new Error(`${name}: the sync of ${commit} ended ${phase}`);
    if (stop.done && Number.isNaN(started)) throw new Error(`${name}: the sync of ${commit} was never seen`);
    await new Promise((r) => setTimeout(r, READ_MS));
  }
}

export async function run(): Promise<Figure[]> {
  const bins = findRealBinaries([...CONTROL_PLANE, ...ARGOCD_BINARIES]);
  if (!bins.built) {
    process.stderr.write(`argocd-real: nothing measured, ${bins.message}\n`);
    return [];
  }
  const cluster = await startRealCluster({ quiet: true });
  const git = await startGitServer();
  const kubes: Kube[] = [];
  let argocd: RealArgoCD | undefined;
  try {
    // No timed refresh: only the syncs measured make the controller look at Git.
    argocd = await startRealArgoCD(cluster, { quiet: true, appResyncSeconds: 0 });
    const kubectl = (...args: string[]) =>
      execFileAsync(bins.path("kubectl"), [`--kubeconfig=${cluster.kubeconfigPath}`, ...args]);
    await kubectl("apply", "--server-side", ...crdFiles().flatMap((f) => ["-f", f]));
    await kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all");
    await kubectl("apply", "--server-side", "-f", SIDECAR_RBAC);

    const kube = new Kube(cluster.kubeConfig());
    const sidecarConfig = new KubeConfig();
    sidecarConfig.loadFromFile(argocd.controllerKubeconfigPath);
    const executorKube = new Kube(sidecarConfig);
    kubes.push(kube, executorKube);

    const files = { "plain/cm.yaml": configMapYaml("settings", "value", "v0") };
    await git.createRepo("bench", { ...files, "held/cm.yaml": configMapYaml("settings", "value", "v0") });
    const url = git.repoUrl("bench");
    for (const name of ["plain", "held"]) {
      await kube.core.createNamespace({ body: { metadata: { name: `bench-${name}` } } });
      await kube.apply(
        APPLICATION,
        argoApplication({
          name,
          repoURL: url,
          path: name,
          destinationNamespace: `bench-${name}`,
        }) as KObject,
        { fieldManager: "argocd-cli" },
      );
    }
    await kube.apply(RESOURCES.argoCDClaim, {
      apiVersion: "applygate.dev/v1alpha1",
      kind: "ArgoCDClaim",
      metadata: { name: "held", namespace: NS },
      spec: { applicationRef: { name: "held", namespace: NS } },
    });
    const targetUid = await createTarget(kube, {
      namespace: NS,
      name: "held-target",
      path: "held",
      claim: { kind: "ArgoCDClaim", name: "held" },
    });
    await kube.patchStatus(RESOURCES.argoCDClaim, NS, "held", inControlStatus("AutomatedSyncOff"), undefined);
    const executor = new ArgoCDExecutor({
      kube: executorKube,
      log: createLogger({ level: "silent" }),
      events: memoryEvents(),
      now: () => new Date(),
      options: { pollMs: 50 },
      checks: unrecordedChecks(executorKube),
    });

    const peer = await GitPeer.clone(url, "main");
    const plainStarted: number[] = [];
    const plainMs: number[] = [];
    const oursStarted: number[] = [];
    const oursMs: number[] = [];
    try {
      // The first pair warms up (the repo-server's clone, connections, caches) uncounted.
      for (let i = -1; i < RUNS; i++) {
        const plainCommit = await peer.commitAndPush(
          "plain/cm.yaml",
          configMapYaml("settings", "value", `p${i}`),
          "plain",
        );
        const app = await kube.get(APPLICATION, NS, "plain");
        if (!app) throw new Error("the plain Application is gone");
        const t0 = performance.now();
        const stop = { done: false };
        await kube.mergePatch(APPLICATION, NS, "plain", {
          operation: {
            sync: { revision: plainCommit, prune: true },
            initiatedBy: { username: "admin" },
          },
        });
        const plain = await follow(kube, "plain", plainCommit, t0, stop);

        const commit = await peer.commitAndPush(
          "held/cm.yaml",
          configMapYaml("settings", "value", `o${i}`),
          "held",
        );
        const attempt = attemptFor({
          token: `bench-${i}-${Date.now()}`,
          claim: { kind: "ArgoCDClaim", namespace: NS, name: "held" },
          applier: { kind: "argocd", namespace: NS, name: "held" },
          branchKey: `${url}@main`,
          repository: url,
          commit,
          targets: [{ uid: targetUid, namespace: NS, name: "held-target", reason: "ForeignCommit" }],
        });
        const r = recorder();
        const ours = { done: false };
        const t1 = performance.now();
        const following = follow(kube, "held", commit, t1, ours);
        await executor.execute(attempt, r.report, new AbortController().signal);
        const oursRun = performance.now() - t1;
        ours.done = true;
        const seen = await following;
        const last = r.reports.at(-1);
        if (last?.phase !== "Succeeded")
          throw new Error(`operation ended ${last?.phase} (${last?.extra.reason})`);
        await until(
          async () =>
            (await kube.core.readNamespacedConfigMap({ name: "settings", namespace: "bench-held" })).data
              ?.value === `o${i}`,
          "the held Application's ConfigMap",
        );
        if (i < 0) continue;
        plainStarted.push(plain.started);
        plainMs.push(plain.succeeded);
        oursStarted.push(seen.started);
        oursMs.push(oursRun);
      }
    } finally {
      await peer.remove();
    }
    await executor.shutdown();
    const base = median(plainMs);
    const ours = median(oursMs);
    const note =
      `real kube-apiserver, Argo CD ${argocd.version}; ${RUNS} runs (a plain sync and an operation ` +
      `back to back in each), reads every ${READ_MS} ms, load average ${loadavg()[0]!.toFixed(1)} on ` +
      `${availableParallelism()} cores at the end`;
    return [
      {
        bench: "argocd-real.send-to-sync-started",
        value: Math.round(median(oursStarted)),
        unit: "ms",
        baseline: Math.round(median(plainStarted)),
        note: `${note}; ours: attempt handed to the executor → Argo CD running its operation, ${spread(oursStarted)}; baseline: operation written → running, ${spread(plainStarted)}`,
      },
      {
        bench: "argocd-real.send-to-succeeded",
        value: Math.round(ours),
        unit: "ms",
        baseline: Math.round(base),
        ratio: Number((ours / base).toFixed(2)),
        note: `${note}; ours: attempt → the executor reports Succeeded, ${spread(oursMs)}; baseline: operation written → Argo CD reports Succeeded, ${spread(plainMs)}`,
      },
      addedTime("argocd-real.fixed-cost", oursMs, plainMs, note, "plain sync"),
    ];
  } finally {
    for (const k of kubes) await k.close();
    await argocd?.stop();
    await cluster.stop();
    await git.close();
  }
}
