// Flux's facts (test/cluster/fluxsim/facts.ts) against real source-controller and
// kustomize-controller on the real control plane: the same test bodies fluxsim passes in the
// default suite. A difference is fluxsim's to fix (test/real/RESULTS.md lists those found).
import { CoreV1Api } from "@kubernetes/client-node";
import { describeFluxFacts } from "../cluster/fluxsim/facts.js";
import { startGitServer } from "../git/server.js";
import { until } from "../support/wait.js";
import { CONTROL_PLANE, FLUX_BINARIES, findRealBinaries } from "./binaries.js";
import { startRealCluster } from "./cluster.js";
import { startRealFlux } from "./flux.js";
import { type FluxLog, readFluxLog } from "./flux-log.js";

const bins = findRealBinaries([...CONTROL_PLANE, ...FLUX_BINARIES]);
if (!bins.built) console.warn(`\n!!! SKIPPED test/real/flux-facts.real.test.ts: ${bins.message}\n`);

describeFluxFacts({
  backend: "real",
  skip: !bins.built,
  timeoutMs: 60_000,
  start: async () => {
    const cluster = await startRealCluster();
    const git = await startGitServer();
    // A held-back dependent looks again after 3 s instead of 30 s, so a test sees a few; longer
    // than the second of silence that tells Flux is idle.
    const flux = await startRealFlux(cluster, { requeueDependency: "3s" });
    const core = cluster.kubeConfig().makeApiClient(CoreV1Api);
    const log = (): FluxLog => readFluxLog(flux.logPaths);
    return {
      kubeConfig: cluster.kubeConfig(),
      git,
      shortInterval: "2s",
      reconciles: (ref) => log().reconciles("Kustomization", ref),
      fetches: (ref) => log().reconciles("GitRepository", ref),
      appliedRevisions: (ref) => log().appliedRevisions(ref),
      idle: () => quiet(flux.logPaths),
      advance: (ms) => new Promise((r) => setTimeout(r, ms)),
      // Each ConfigMap costs kustomize-controller a dry-run and an apply: 150 take about a second.
      slowObjects: 150,
      slowApplies: () => () => {},
      // Removed in the background: each test has namespaces of its own, and waiting for the
      // namespace controller would cost seconds a test.
      cleanUp: async (namespaces) => {
        await Promise.all(namespaces.map((name) => core.deleteNamespace({ name }).catch(() => undefined)));
      },
      stop: async () => {
        await flux.stop();
        await cluster.stop();
        await git.close();
      },
    };
  },
});

/** Resolves once neither controller has written a log line for a second: nothing left in hand. */
async function quiet(paths: Record<string, string>): Promise<void> {
  const { stat } = await import("node:fs/promises");
  const sizes = async () =>
    (await Promise.all(Object.values(paths).map((p) => stat(p)))).map((s) => s.size).join();
  let last = await sizes();
  let since = Date.now();
  await until(
    async () => {
      const now = await sizes();
      if (now !== last) {
        last = now;
        since = Date.now();
      }
      return Date.now() - since >= 1000;
    },
    "Flux to be quiet",
    { timeoutMs: 60_000, everyMs: 100 },
  );
}
