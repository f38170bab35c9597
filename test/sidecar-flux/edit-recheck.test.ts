/**
 * The edit recheck, just before the resume: an API edit accepted into the branch's inbox after
 * the attempt's flush mark ends the attempt Stale (EditedAfterFlush) with nothing resumed, so the
 * older commit never runs over the edit; the attempt for the commit that carries the edit then
 * applies. Real Redis (the gateway's accept script, the worker's fenced tip record), the real Git
 * server and fluxsim.
 */
import { randomUUID } from "node:crypto";
import { Queue } from "bullmq";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AcceptedWrite, QUEUES } from "../../queue/contract.js";
import { StatusReason } from "../../queue/crds/reasons.js";
import { acceptWrite } from "../../queue/intake.js";
import { BranchLease } from "../../queue/worker/lease.js";
import { recordTip } from "../../queue/worker/tip-record.js";
import { redisFreshnessCheck } from "../../sidecar/tip-check.js";
import { type IsolatedRedis, isolatedRedis } from "../redis/isolated.js";
import { configMap, type Scene, scene, startWorld, type World } from "./harness.js";

let world: World;
let redis: IsolatedRedis;
let branches: Queue;
beforeAll(async () => {
  world = await startWorld();
  redis = await isolatedRedis("editrecheck");
  branches = new Queue(QUEUES.branches, {
    connection: { url: redis.url, maxRetriesPerRequest: null },
    prefix: redis.prefix,
  });
});
afterAll(async () => {
  await branches?.close();
  await world?.stop();
  await redis?.cleanup();
});

/** The scene's branch as its owner holds it: the tip recorded under the lease. */
async function owner(s: Scene) {
  const key = `${s.url}@main`;
  const lease = new BranchLease(redis.client, redis.prefix, key, "worker", 30_000);
  if (!(await lease.acquire())) throw new Error("lease is held");
  return { record: (tip: string) => recordTip(redis.client, redis.prefix, key, lease.token as string, tip) };
}

/** An API edit of app-config on the cluster, and its write accepted by the gateway; the inbox entry id. */
async function edit(s: Scene, value: string): Promise<string> {
  const cm = await world.kube.core.readNamespacedConfigMap({ namespace: s.ns, name: "app-config" });
  await world.kube.core.replaceNamespacedConfigMap({
    namespace: s.ns,
    name: "app-config",
    body: { ...cm, data: { v: value } },
    fieldManager: "kubectl-edit",
  });
  const write: AcceptedWrite = {
    id: `w-${randomUUID()}`,
    target: { namespace: s.ns, name: "target" },
    branchKey: `${s.url}@main`,
    path: "target",
    acceptedAt: new Date().toISOString(),
    author: { name: "Ada", email: "ada@example.com" },
    changes: [
      { op: "upsert", object: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "app-config" } } },
    ],
  };
  const r = await acceptWrite(redis.client, redis.prefix, write, branches);
  if (!r.accepted) throw new Error("not accepted");
  return r.entryId;
}

describe("the Flux edit recheck", () => {
  it("an edit accepted after the flush mark ends the attempt Stale before the resume; the attempt carrying it applies", async () => {
    const s = await scene(world, { checks: { freshness: redisFreshnessCheck(redis.client, redis.prefix) } });
    await s.adopt();
    const branch = await owner(s);
    const older = await s.push({ "apps/cm.yaml": configMap("app-config", "2") });
    await branch.record(older);
    // The flush published `older` having read the inbox up to here; then the user edits.
    const mark = await edit(s, "0");
    const editEntry = await edit(s, "3");
    const applied = world.sim.appliedRevisions(s.ks).length;
    const before = (await s.readKs()).metadata.resourceVersion;

    const attempt = s.attempt(older, { editsAfter: { mark, folders: ["target"] } });
    const r = await s.run(attempt);
    expect(r.phases).toEqual(["Requested", "Stale"]);
    expect(r.last.reason).toBe(StatusReason.EditedAfterFlush);
    // Nothing resumed: the older commit never ran over the edit.
    expect((await s.readKs()).metadata.resourceVersion).toBe(before);
    expect(world.sim.appliedRevisions(s.ks)).toHaveLength(applied);
    expect(await s.configValue()).toBe("3");
    // Its record withdrawn, as for any Stale.
    const op = ((await s.readClaim()).status as { operation?: { token?: string } } | undefined)?.operation;
    expect(op?.token).not.toBe(attempt.token);

    // The worker flushes again: the commit holding the edit, sent with the mark past it.
    const carrying = await s.push({ "apps/cm.yaml": configMap("app-config", "3") });
    await branch.record(carrying);
    const again = await s.run(s.attempt(carrying, { editsAfter: { mark: editEntry, folders: ["target"] } }));
    expect(again.phases).toEqual(["Requested", "Running", "Settling", "Succeeded"]);
    expect(world.sim.appliedRevisions(s.ks).slice(applied)).toEqual([`main@sha1:${carrying}`]);
    expect(await s.configValue()).toBe("3");
  });

  it("an edit to another folder, or one before the mark, does not hold the apply", async () => {
    const s = await scene(world, { checks: { freshness: redisFreshnessCheck(redis.client, redis.prefix) } });
    await s.adopt();
    const branch = await owner(s);
    const commit = await s.push({ "apps/cm.yaml": configMap("app-config", "5") });
    await branch.record(commit);
    const mark = await edit(s, "4"); // in the inbox, but not after the mark
    const r = await s.run(s.attempt(commit, { editsAfter: { mark, folders: ["elsewhere"] } }));
    expect(r.last.phase).toBe("Succeeded");
    expect(await s.configValue()).toBe("5");
  });

  it("past the bound (no recheck on the attempt) the apply goes: continuous editing never starves it", async () => {
    const s = await scene(world, { checks: { freshness: redisFreshnessCheck(redis.client, redis.prefix) } });
    await s.adopt();
    const branch = await owner(s);
    const commit = await s.push({ "apps/cm.yaml": configMap("app-config", "7") });
    await branch.record(commit);
    await edit(s, "8");
    const r = await s.run(s.attempt(commit));
    expect(r.last.phase).toBe("Succeeded");
    // The window and a Repair handle this one, as before.
    expect(await s.configValue()).toBe("7");
  });
});
