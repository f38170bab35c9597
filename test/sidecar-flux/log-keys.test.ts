/**
 * The sidecar's log lines as an operator queries them: each key once on a line (a key bound at
 * two levels of pino children is written twice, and Loki's or Elasticsearch's JSON parsing then
 * keeps one at random), and `claim` and `applier` in the shape every process writes them.
 * Through startSidecar with the Flux kind, one apply to its end, over real Redis and fluxsim.
 */
import { Queue } from "bullmq";
import { afterAll, beforeAll, expect, it } from "vitest";
import { attemptsQueue, QUEUES, type Report } from "../../queue/contract.js";
import { API_VERSION } from "../../queue/crds/index.js";
import { isConditionTrue } from "../../sidecar/claims/conditions.js";
import * as flux from "../../sidecar/flux/index.js";
import { startSidecar } from "../../sidecar/main.js";
import { type IsolatedRedis, isolatedRedis } from "../redis/isolated.js";
import { capturingLogger, repeatedKeys, topLevelKeys } from "../support/log-lines.js";
import { configMap, scene, startWorld, until, type World } from "./harness.js";

let world: World;
let redis: IsolatedRedis;
beforeAll(async () => {
  world = await startWorld();
  redis = await isolatedRedis("flux-log-keys");
});
afterAll(async () => {
  await world?.stop();
  await redis?.cleanup();
});

it("a sidecar line holds each key once, and claim and applier as <kind>/<namespace>/<name>", async () => {
  const s = await scene(world);
  await world.api.applyYaml(`
apiVersion: ${API_VERSION}
kind: GitProvider
metadata: {name: repo, namespace: ${s.ns}}
spec: {url: "${s.url}", type: gitea, webhookSecretRef: {name: hook}}
---
apiVersion: ${API_VERSION}
kind: GitTarget
metadata: {name: apps, namespace: ${s.ns}}
spec: {providerRef: {name: repo}, branch: main, path: apps, claimRef: {kind: FluxClaim, name: claim}}
`);
  const { log, lines } = capturingLogger({ component: "sidecar" });
  const sidecar = await startSidecar({
    applier: "flux",
    kubeConfig: world.api.kubeConfig(),
    redisUrl: redis.url,
    redisPrefix: redis.prefix,
    log,
    resyncMs: 200,
    kindModule: flux,
    options: { pollMs: 50, shortRequeueMs: 20, windowGraceMs: 200 },
  });
  const attempts = new Queue(attemptsQueue("flux"), { connection: { url: redis.url }, prefix: redis.prefix });
  const reports = new Queue(QUEUES.reports, { connection: { url: redis.url }, prefix: redis.prefix });
  const commit = await s.push({ "apps/cm.yaml": configMap("app-config", "logged") });
  const attempt = s.attempt(commit);
  try {
    await until(async () => {
      const c = await s.readClaim();
      return isConditionTrue((c.status as { conditions?: never[] })?.conditions, "InControl");
    }, "the claim in control");
    await attempts.add("attempt", attempt, { jobId: attempt.token, attempts: 1 });
    await until(async () => {
      const jobs = await reports.getJobs(["waiting", "active", "completed", "delayed"]);
      return jobs.some((j) => {
        const r = j.data as Report;
        return r.type === "phase" && r.token === attempt.token && r.phase === "Succeeded";
      });
    }, "the Succeeded report");
  } finally {
    await attempts.close();
    await reports.close();
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
