/**
 * `npm run bench -- claims`: how soon the claim reconciler acts on a change, through the real Flux
 * sidecar (startSidecar) over fluxsim and the simulated API server, with the safety-net pass ten
 * minutes away: claim created → first status; claim and GitTarget created together → in control;
 * and claim created → first status while another claim's applier answers every read in 5 s.
 * Medians of a few runs.
 */
import { startClaimWorld } from "../sidecar-flux/claim-world.js";
import type { Figure } from "./figure.js";

const RUNS = 5;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

export async function run(): Promise<Figure[]> {
  const w = await startClaimWorld();
  try {
    const alone: number[] = [];
    const bound: number[] = [];
    const beside: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const a = await w.namespaceWithApplier();
      let t0 = Date.now();
      await w.createClaim(a);
      alone.push(await w.waitFor(a, "Configured", () => true, t0));

      const b = await w.namespaceWithApplier();
      t0 = Date.now();
      await w.createClaim(b, true);
      bound.push(await w.waitFor(b, "InControl", (c) => c.status === "True", t0));
    }
    for (let i = 0; i < 3; i++) {
      const slow = await w.namespaceWithApplier();
      const quick = await w.namespaceWithApplier();
      w.world.api.faults.latency(5_000, {
        method: "GET",
        pathPrefix: `/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/${slow}/kustomizations/apps`,
      });
      await w.createClaim(slow, true);
      const t0 = Date.now();
      await w.createClaim(quick);
      beside.push(await w.waitFor(quick, "Configured", () => true, t0));
      w.world.api.faults.latency(0);
    }
    return [
      {
        bench: "claims: created → first status",
        value: median(alone),
        unit: "ms",
        note: `median of ${RUNS}`,
      },
      {
        bench: "claims: claim + GitTarget created → InControl",
        value: median(bound),
        unit: "ms",
        note: `median of ${RUNS}`,
      },
      {
        bench: "claims: created → first status, beside a claim whose applier reads take 5 s",
        value: median(beside),
        unit: "ms",
        note: "median of 3",
      },
    ];
  } finally {
    await w.stop();
  }
}
