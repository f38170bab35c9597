/**
 * The sidecar's log lines as an operator queries them: each key once on a line (a key bound at
 * two levels of pino children is written twice, and Loki's or Elasticsearch's JSON parsing then
 * keeps one at random), and `claim` and `applier` in the shape every process writes them.
 * Through startSidecar with the Flux kind, one apply to its end, over real Redis and fluxsim.
 */
import { expect, it } from "vitest";
import * as flux from "../../sidecar/flux/index.js";
import { fileWorld } from "../support/file-world.js";
import { capturingLogger, repeatedKeys, topLevelKeys } from "../support/log-lines.js";
import { scene, startWorld } from "./harness.js";

const world = fileWorld(() => startWorld());

it("a sidecar line holds each key once, and claim and applier as <kind>/<namespace>/<name>", async () => {
  const s = await scene(world);
  const { log, lines } = capturingLogger({ component: "sidecar" });
  const sidecar = await world.startFluxSidecar({ log, resyncMs: 200, kindModule: flux });
  const commit = await s.pushConfig("logged");
  const attempt = s.attempt(commit);
  try {
    await s.inControl();
    await world.queues.send(attempt);
    await world.queues.reported(attempt.token, "Succeeded");
  } finally {
    await sidecar.stop();
  }
  const ofTheAttempt = lines.filter((l) => (JSON.parse(l) as { token?: string }).token === attempt.token);
  expect(ofTheAttempt.length).toBeGreaterThan(0);
  expect(lines.filter((l) => repeatedKeys(l).length > 0)).toEqual([]);
  for (const line of lines) {
    const o = JSON.parse(line) as Record<string, unknown>;
    if ("claim" in o) expect(o.claim).toBe(`FluxClaim/${s.ns}/claim`);
    if ("applier" in o) expect(o.applier).toBe(`flux/${s.ns}/apps`);
    expect(topLevelKeys(line)).not.toContain("kustomization");
    expect(o.applierKind).toBe("flux");
  }
  // The executor's lines name the operation's claim and applier.
  expect(ofTheAttempt.some((l) => "claim" in JSON.parse(l) && "applier" in JSON.parse(l))).toBe(true);
});
