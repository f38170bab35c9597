/**
 * `npm run bench -- flux`: the fixed cost the Flux lifecycle adds per apply. fluxsim's timing
 * knobs are set to the seed's measurements (about 50 ms source round trip, 85 ms build, 4 ms per
 * object). The source fetch is the same in both and dominated here by the git CLI, so each run
 * starts with the artifact already holding the commit. The baseline is a plain reconcile of a
 * Kustomization resumed (`flux resume ks`: spec.suspend false, wait until the commit is applied
 * and Ready); ours is the whole operation, from the attempt to Succeeded (recheck, record,
 * resume, follow, suspend again, suspend handled). Medians of a few runs, each a plain resume and
 * an operation back to back. `FLUX_BENCH_RUNS`, `FLUX_BENCH_OBJECTS` and `FLUX_BENCH_SEND=0`
 * change how many runs, which sizes, and leave out the send-to-apply figures.
 */

import { availableParallelism, loadavg } from "node:os";
import { fluxReadyOf, fluxStatusField, Kube } from "../../queue/kube/index.js";
import type { FluxClient } from "../../sidecar/flux/client.js";
import { GIT_REPOSITORY, KUSTOMIZATION } from "../../sidecar/flux/resources.js";
import { recheckStanding } from "../../sidecar/standing.js";
import { configMap, type Scene, scene, startWorld, until, type World } from "../sidecar-flux/harness.js";
import type { Figure } from "./figure.js";
import { median, sidecarRig, type Timeline } from "./send-to-apply.js";

const KNOBS = { fetchLatencyMs: 50, buildMs: 85, perObjectApplyMs: 4, defaultIntervalScale: 1 };
/** Runs per size (`FLUX_BENCH_RUNS`, default 5). */
const RUNS = Number(process.env.FLUX_BENCH_RUNS ?? 5);
/** Sizes in objects (`FLUX_BENCH_OBJECTS`, default "1,200"). */
const OBJECTS = (process.env.FLUX_BENCH_OBJECTS ?? "1,200").split(",").map(Number);
/** `FLUX_BENCH_SEND=0` leaves out the send-to-apply figures. */
const SEND = process.env.FLUX_BENCH_SEND !== "0";
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

/** Figures at a few points of a sample: the spread a loaded machine gives. */
const spread = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const at = (q: number) => Math.round(s[Math.min(s.length - 1, Math.floor(q * (s.length - 1)))]!);
  return `min ${at(0)}, p25 ${at(0.25)}, p75 ${at(0.75)}, max ${at(1)}`;
};

export async function run(): Promise<Figure[]> {
  const world = await startWorld(KNOBS);
  const figures: Figure[] = [];
  try {
    if (SEND) figures.push(...(await sendToApply(world)));
    for (const objects of OBJECTS) {
      const files = (v: string) =>
        Object.fromEntries(
          Array.from({ length: objects }, (_, i) => [`apps/cm-${i}.yaml`, configMap(`cm-${i}`, v)]),
        );
      // Baseline: resumed, applied by a stamped source's new artifact.
      const plain = await scene(world, { objects });
      // Ours: the seven steps, held suspended, the executor under a user of its own so the API
      // server counts its requests, the standing recheck included (fluxsim's own reconcile is the
      // same in both).
      const user = `bench-sidecar-${objects}`;
      world.api.addUser(user, `token-${user}`, "all");
      const executorKube = new Kube(world.api.kubeConfig(user));
      const held = await scene(world, {
        objects,
        options: { pollMs: 1000 },
        executorKube,
        checks: { standing: (a) => recheckStanding(executorKube, a) },
      });
      await held.adopt();
      const plainMs: number[] = [];
      const oursMs: number[] = [];
      const requests: number[] = [];
      // One plain resume and one operation back to back in each run, so a machine whose load
      // drifts weighs on both alike; the first pair warms up (discovery, connections) uncounted.
      for (let i = -1; i < RUNS; i++) {
        const pc = await plain.push(files(`p${i}`));
        // Held while the source fetches (a new artifact would apply it at once), then resumed.
        await world.kube.mergePatch(KUSTOMIZATION, plain.ns, "apps", { spec: { suspend: true } });
        await prefetch(world, plain, pc, `fetch-p${i}`);
        const t0 = performance.now();
        await world.kube.mergePatch(KUSTOMIZATION, plain.ns, "apps", { spec: { suspend: false } });
        await until(
          async () => {
            const ks = await plain.readKs();
            return (
              fluxReadyOf(ks)?.status === "True" &&
              fluxStatusField(ks, "lastAppliedRevision") === `main@sha1:${pc}`
            );
          },
          "the plain apply",
          60_000,
        );
        const plainRun = performance.now() - t0;

        const commit = await held.push(files(`o${i}`));
        await prefetch(world, held, commit, `fetch-o${i}`);
        const before = world.api.requestsBy(user);
        const t1 = performance.now();
        const r = await held.run(held.attempt(commit));
        if (r.last.phase !== "Succeeded")
          throw new Error(`operation ended ${r.last.phase} (${r.last.reason})`);
        const oursRun = performance.now() - t1;
        if (i < 0) continue;
        plainMs.push(plainRun);
        oursMs.push(oursRun);
        requests.push(world.api.requestsBy(user) - before);
      }
      await executorKube.close();
      const base = median(plainMs);
      const ours = median(oursMs);
      const added = oursMs.map((o, i) => o - plainMs[i]!);
      const note = `${objects} object(s), ${RUNS} runs (a plain resume and an operation back to back in each), knobs ${JSON.stringify(KNOBS)}, load average ${loadavg()[0]!.toFixed(1)} on ${availableParallelism()} cores at the end`;
      figures.push({
        bench: `flux.apply.suspended.${objects}`,
        value: Math.round(ours),
        unit: "ms",
        baseline: Math.round(base),
        ratio: Number((ours / base).toFixed(2)),
        note: `${note}; baseline: a plain resume (flux resume), artifact fetched beforehand; operation ${spread(oursMs)}; plain ${spread(plainMs)}`,
      });
      figures.push({
        bench: `flux.apply.fixed-cost.${objects}`,
        value: Math.round(ours - base),
        unit: "ms",
        note: `${note}; median operation minus median plain resume; per pair: median ${Math.round(median(added))}, ${spread(added)} (${added.map(Math.round).join(", ")})`,
      });
      figures.push({
        bench: `flux.apply.requests.${objects}`,
        value: median(requests),
        unit: "requests",
        baseline: 1,
        note: `${note}; API requests the executor makes for one apply, attempt to suspended again and completed, the standing recheck included (a watch counts once); baseline: a plain resume is one patch; per run ${requests.join(", ")}`,
      });
    }
  } finally {
    await world.stop();
  }
  return figures;
}
