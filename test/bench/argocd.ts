/**
 * `npm run bench -- argocd`: attempt sent → sync update written, for an Application an ArgoCDClaim
 * holds, through the attempts queue and the executor host with the sidecar's Redis checks (the
 * tip, the edit recheck), every API request paying an in-cluster round trip. argosim over HTTP and
 * the real Git server. Medians of a few runs.
 */

import { Kube } from "../../queue/kube/index.js";
import { startCluster } from "../sidecar-argocd/harness.js";
import type { Figure } from "./figure.js";
import { median, sidecarRig, type Timeline } from "./send-to-apply.js";

const RUNS = 11;
/** Latency of every API request, about an in-cluster round trip. */
const API_LATENCY_MS = 5;

export async function run(): Promise<Figure[]> {
  const c = await startCluster();
  const rig = await sidecarRig();
  try {
    await c.startArgo();
    const name = "bench";
    const ns = await c.namespace(`ns-${name}`);
    const repo = await c.repo();
    await c.createApp(name, repo, {
      destination: { server: "https://kubernetes.default.svc", namespace: ns },
      syncPolicy: { automated: { enabled: false, prune: true } },
    });
    await c.createClaim(name, name);
    await c.markHeld(name);
    // The executor under a user of its own, so the API server counts its requests. The update
    // that starts the sync is its only replace of the Application.
    const user = "bench-sidecar";
    c.api.addUser(user, `token-${user}`, "all");
    const own = new Kube(c.api.kubeConfig(user));
    const kube = Object.create(own) as Kube;
    kube.replace = ((...args: Parameters<Kube["replace"]>) => {
      rig.applyStarted();
      return own.replace(...args);
    }) as Kube["replace"];
    const executor = c.executor({ pollMs: 50 }, { kube, standingKube: c.kube, checks: rig.checks });
    rig.host("argocd", executor);
    const branchKey = `${repo.url}@main`;
    c.api.faults.latency(API_LATENCY_MS);
    const runs: Timeline[] = [];
    const requests: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const [commit] = await repo.settings(`b${i}`);
      await rig.record(branchKey, commit);
      const before = c.api.requestsBy(user);
      const t = await rig.run({
        ...c.attempt(name, commit, `bench-${i}-${Date.now()}`),
        branchKey,
        editsAfter: { mark: "0-0", folders: [`apps/${name}`] },
      });
      if (t.last !== "Succeeded") throw new Error(`operation ended ${t.last}`);
      runs.push(t);
      requests.push(c.api.requestsBy(user) - before);
    }
    await own.close();
    c.api.faults.latency(0);
    const m = (k: keyof Omit<Timeline, "last">) => Math.round(median(runs.map((r) => r[k])));
    const note = `${RUNS} runs, API latency ${API_LATENCY_MS} ms; taken ${m("taken")} ms, Requested ${m("requested")} ms after the send`;
    return [
      { bench: "argocd.send-to-apply", value: m("applyStarted"), unit: "ms", note },
      { bench: "argocd.send-to-requested", value: m("requested"), unit: "ms", note },
      {
        bench: "argocd.sync.requests",
        value: median(requests),
        unit: "requests",
        note: `${RUNS} runs; API requests the executor makes for one sync, send to Succeeded (a watch counts once); per run ${requests.join(", ")}`,
      },
    ];
  } finally {
    await rig.close();
    await c.stop();
  }
}
