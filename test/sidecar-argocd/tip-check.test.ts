/**
 * The Argo CD executor asks the tip the branch worker recorded in Redis (redisTipCheck) after its
 * record and before it starts the sync: a moved tip withdraws the record and starts nothing.
 * argosim over HTTP, the real Git server and real Redis.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RESOURCES } from "../../queue/kube/index.js";
import { BranchLease } from "../../queue/worker/lease.js";
import { recordTip } from "../../queue/worker/tip-record.js";
import { ArgoCDExecutor } from "../../sidecar/argocd/executor.js";
import { readOperation } from "../../sidecar/operation-record.js";
import { redisTipCheck } from "../../sidecar/tip-check.js";
import { type IsolatedRedis, isolatedRedis } from "../redis/isolated.js";
import { unrecordedChecks } from "../support/safety-checks.js";
import { type Cluster, cm, type Repo, recorder, startCluster } from "./harness.js";

let c: Cluster;
let redis: IsolatedRedis;
let repo: Repo;
let c1: string;
let c2: string;

beforeAll(async () => {
  c = await startCluster();
  await c.startArgo();
  redis = await isolatedRedis("argotip");
  repo = await c.repo();
  [c1, c2] = (await repo.pushAll([
    ["cm.yaml", cm("settings", "v1")],
    ["cm.yaml", cm("settings", "v2")],
  ])) as [string, string];
});
afterAll(async () => {
  await c?.close();
  await redis?.cleanup();
});

describe("the recorded tip decides Stale for Argo CD", () => {
  it("an attempt for a commit that is no longer the recorded tip ends Stale: record withdrawn, no sync", async () => {
    const name = "tipapp";
    await c.heldApp(name, repo);
    const attempt = c.attempt(name, name, c1, `t-${name}`);
    const lease = new BranchLease(redis.client, redis.prefix, attempt.branchKey, "worker", 10_000);
    expect(await lease.acquire()).toBe(true);
    await recordTip(redis.client, redis.prefix, attempt.branchKey, lease.token as string, c2);

    const executor = new ArgoCDExecutor({
      kube: c.kube,
      log: c.log,
      events: c.events,
      now: () => new Date(),
      options: { pollMs: 20, busyWaitMs: 10_000 },
      checks: unrecordedChecks(c.kube, { tip: redisTipCheck(redis.client, redis.prefix) }),
    });
    const r = recorder();
    await executor.execute(attempt, r.report, new AbortController().signal);
    expect(r.phases()).toEqual(["Requested", "Stale"]);
    expect(c.argo!.syncs({ namespace: "argocd", name })).toHaveLength(0);
    expect((await c.getApp(name)).operation ?? undefined).toBeUndefined();
    expect(
      await readOperation(c.kube, { type: RESOURCES.argoCDClaim, namespace: "argocd", name }),
    ).toBeUndefined();

    // At the recorded tip the same executor syncs.
    const current = c.attempt(name, name, c2, `t-${name}-2`);
    const r2 = recorder();
    await executor.execute(current, r2.report, new AbortController().signal);
    expect(r2.phases().at(-1)).toBe("Succeeded");
    expect(c.argo!.syncs({ namespace: "argocd", name })).toHaveLength(1);
  });
});
