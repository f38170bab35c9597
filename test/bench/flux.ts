/**
 * `npm run bench -- flux`: the fixed cost the Flux lifecycle adds per apply. fluxsim's timing
 * knobs are set to the seed's measurements (about 50 ms source round trip, 85 ms build, 4 ms per
 * object). The source fetch is the same in both and dominated here by the git CLI, so each run
 * starts with the artifact already holding the commit. The baseline is a plain reconcile of a
 * Kustomization resumed (`flux resume ks`: spec.suspend false, wait until the commit is applied
 * and Ready); ours is the whole operation, from the attempt to Succeeded (recheck, record,
 * resume, follow, suspend again, suspend handled). Medians of a few runs.
 */

import { Kube } from "../../queue/kube/index.js";
import type { FluxClient } from "../../sidecar/flux/client.js";
import { GIT_REPOSITORY, KUSTOMIZATION } from "../../sidecar/flux/resources.js";
import { configMap, type Scene, scene, startWorld, until, type World } from "../sidecar-flux/harness.js";
import type { Figure } from "./figure.js";
import { median, sidecarRig, type Timeline } from "./send-to-apply.js";

const KNOBS = { fetchLatencyMs: 50, buildMs: 85, perObjectApplyMs: 4, defaultIntervalScale: 1 };
const RUNS = 5;
const SEND_RUNS = 11;
/** Latency of every API request in the send-to-apply figures, about an in-cluster round trip. */
const API_LATENCY_MS = 5;

/** Makes the source's artifact hold the commit before a timed run. */
async function prefetch(world: World, s: Scene, commit: string, token: string) {
  await world.kube.mergePatch(GIT_REPOSITORY, s.ns, "repo", {
    metadata: { annotations: { "reconcile.fluxcd.io/requestedAt": token } },
  });
  await until(
    async () => {
      const src = await world.kube.get<{
        metadata: { name: string };
        status?: { artifact?: { revision?: string } };
      }>(GIT_REPOSITORY, s.ns, "repo");
      return src?.status?.artifact?.revision === `main@sha1:${commit}`;
    },
    "the fetch",
    60_000,
  );
}

/**
 * Attempt sent → resume written, through the attempts queue and the executor host, with the
 * sidecar's Redis checks: once with the source fetch the attempt asks for (the usual case: the
 * commit was just published), once with the artifact already holding it (the executor's own cost).
 */
export async function sendToApply(world: World): Promise<Figure[]> {
  const rig = await sidecarRig();
  const figures: Figure[] = [];
  try {
    const s = await scene(world, { options: { pollMs: 1000 }, checks: rig.checks });
    // Every request pays what it pays in a cluster: in this one process it would cost only CPU.
    world.api.faults.latency(API_LATENCY_MS);
    await s.adopt();
    const client = (s.kind.executor as unknown as { d: { client: FluxClient } }).d.client;
    const applySuspend = client.applySuspend.bind(client);
    client.applySuspend = (ref, suspend, token, guard) => {
      if (!suspend) rig.applyStarted();
      return applySuspend(ref, suspend, token, guard);
    };
    rig.host("flux", s.kind.executor);
    const branchKey = `${s.url}@main`;
    for (const prefetched of [false, true]) {
      const runs: Timeline[] = [];
      for (let i = 0; i < SEND_RUNS; i++) {
        const commit = await s.push({ "apps/cm.yaml": configMap("app-config", `s${prefetched}${i}`) });
        await rig.record(branchKey, commit);
        if (prefetched) await prefetch(world, s, commit, `fetch-s${i}`);
        const t = await rig.run(s.attempt(commit, { editsAfter: { mark: "0-0", folders: ["target"] } }));
        if (t.last !== "Succeeded") throw new Error(`operation ended ${t.last}`);
        runs.push(t);
      }
      const m = (k: keyof Omit<Timeline, "last">) => Math.round(median(runs.map((r) => r[k])));
      const name = prefetched ? "prefetched" : "fetch";
      const note = `${SEND_RUNS} runs, knobs ${JSON.stringify(KNOBS)}, API latency ${API_LATENCY_MS} ms; ${prefetched ? "artifact fetched beforehand" : "the attempt's source fetch included"}; taken ${m("taken")} ms, Requested ${m("requested")} ms after the send`;
      figures.push({ bench: `flux.send-to-apply.${name}`, value: m("applyStarted"), unit: "ms", note });
      figures.push({ bench: `flux.send-to-requested.${name}`, value: m("requested"), unit: "ms", note });
    }
  } finally {
    world.api.faults.latency(0);
    await rig.close();
  }
  return figures;
}

export async function run(): Promise<Figure[]> {
  const world = await startWorld(KNOBS);
  const figures: Figure[] = [];
  try {
    figures.push(...(await sendToApply(world)));
    for (const objects of [1, 200]) {
      const files = (v: string) =>
        Object.fromEntries(
          Array.from({ length: objects }, (_, i) => [`apps/cm-${i}.yaml`, configMap(`cm-${i}`, v)]),
        );
      // Baseline: resumed, applied by a stamped source's new artifact.
      const plain = await scene(world, { objects });
      const plainMs: number[] = [];
      for (let i = 0; i < RUNS; i++) {
        const commit = await plain.push(files(`p${i}`));
        // Held while the source fetches (a new artifact would apply it at once), then resumed.
        await world.kube.mergePatch(KUSTOMIZATION, plain.ns, "apps", { spec: { suspend: true } });
        await prefetch(world, plain, commit, `fetch-p${i}`);
        const t0 = performance.now();
        await world.kube.mergePatch(KUSTOMIZATION, plain.ns, "apps", { spec: { suspend: false } });
        await until(
          async () => {
            const ks = await plain.readKs();
            const ready = ks.status?.conditions?.find((c) => c.type === "Ready");
            return ready?.status === "True" && ks.status?.lastAppliedRevision === `main@sha1:${commit}`;
          },
          "the plain apply",
          60_000,
        );
        plainMs.push(performance.now() - t0);
      }
      // Ours: the seven steps, held suspended, the executor under a user of its own so the API
      // server counts its requests (fluxsim's own reconcile is the same in both).
      const user = `bench-sidecar-${objects}`;
      world.api.addUser(user, `token-${user}`, "all");
      const executorKube = new Kube(world.api.kubeConfig(user));
      const held = await scene(world, { objects, options: { pollMs: 1000 }, executorKube });
      await held.adopt();
      const oursMs: number[] = [];
      const requests: number[] = [];
      for (let i = 0; i < RUNS; i++) {
        const commit = await held.push(files(`o${i}`));
        await prefetch(world, held, commit, `fetch-o${i}`);
        const before = world.api.requestsBy(user);
        const t0 = performance.now();
        const r = await held.run(held.attempt(commit));
        if (r.last.phase !== "Succeeded")
          throw new Error(`operation ended ${r.last.phase} (${r.last.reason})`);
        oursMs.push(performance.now() - t0);
        requests.push(world.api.requestsBy(user) - before);
      }
      await executorKube.close();
      const base = median(plainMs);
      const ours = median(oursMs);
      const note = `${objects} object(s), ${RUNS} runs, knobs ${JSON.stringify(KNOBS)}`;
      figures.push({
        bench: `flux.apply.suspended.${objects}`,
        value: Math.round(ours),
        unit: "ms",
        baseline: Math.round(base),
        ratio: Number((ours / base).toFixed(2)),
        note: `${note}; baseline: a plain resume (flux resume), artifact fetched beforehand`,
      });
      figures.push({
        bench: `flux.apply.fixed-cost.${objects}`,
        value: Math.round(ours - base),
        unit: "ms",
        note,
      });
      figures.push({
        bench: `flux.apply.requests.${objects}`,
        value: median(requests),
        unit: "requests",
        baseline: 1,
        note: `${note}; API requests the executor makes for one apply, resume to suspended again (a watch counts once); baseline: a plain resume is one patch; per run ${requests.join(", ")}`,
      });
    }
  } finally {
    await world.stop();
  }
  return figures;
}
