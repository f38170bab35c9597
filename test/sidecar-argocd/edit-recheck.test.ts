/**
 * The Argo CD edit recheck, just before the update that starts the sync: an API edit accepted into
 * the branch's inbox after the attempt's flush mark ends the attempt Stale (EditedAfterFlush),
 * record withdrawn and no sync, so the older commit never runs over the edit; the attempt for the
 * commit carrying the edit then syncs it. argosim over HTTP, the real Git server and real Redis.
 */
import { randomUUID } from "node:crypto";
import * as k8s from "@kubernetes/client-node";
import { Queue } from "bullmq";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AcceptedWrite, type Attempt, QUEUES } from "../../queue/contract.js";
import { StatusReason } from "../../queue/crds/reasons.js";
import { acceptWrite } from "../../queue/intake.js";
import { RESOURCES } from "../../queue/kube/index.js";
import { BranchLease } from "../../queue/worker/lease.js";
import { recordTip } from "../../queue/worker/tip-record.js";
import { ArgoCDExecutor } from "../../sidecar/argocd/executor.js";
import { readOperation } from "../../sidecar/operation-record.js";
import { redisFreshnessCheck } from "../../sidecar/tip-check.js";
import { type IsolatedRedis, isolatedRedis } from "../redis/isolated.js";
import { unrecordedChecks } from "../support/safety-checks.js";
import { type Cluster, cm, recorder, startCluster } from "./harness.js";

let c: Cluster;
let redis: IsolatedRedis;
let branches: Queue;
let core: k8s.CoreV1Api;

beforeAll(async () => {
  c = await startCluster();
  await c.startArgo();
  redis = await isolatedRedis("argoedit");
  branches = new Queue(QUEUES.branches, {
    connection: { url: redis.url, maxRetriesPerRequest: null },
    prefix: redis.prefix,
  });
  core = c.kc.makeApiClient(k8s.CoreV1Api);
});
afterAll(async () => {
  await branches?.close();
  await c?.close();
  await redis?.cleanup();
});

const valueIn = async (namespace: string) =>
  (await core.readNamespacedConfigMap({ name: "settings", namespace }).catch(() => undefined))?.data?.value;

describe("the Argo CD edit recheck", () => {
  it("an edit accepted after the flush mark ends the attempt Stale before the sync; the attempt carrying it syncs", async () => {
    const name = "editapp";
    const repo = await c.repo();
    const [c1, c2] = (await repo.pushAll([
      ["cm.yaml", cm("settings", "v1")],
      ["cm.yaml", cm("settings", "v2")],
    ])) as [string, string];
    const { ns } = await c.heldApp(name, repo);
    const branchKey = `${repo.url}@main`;
    const lease = new BranchLease(redis.client, redis.prefix, branchKey, "worker", 30_000);
    expect(await lease.acquire()).toBe(true);
    const record = (tip: string) =>
      recordTip(redis.client, redis.prefix, branchKey, lease.token as string, tip);
    const executor = new ArgoCDExecutor({
      kube: c.kube,
      log: c.log,
      events: c.events,
      now: () => new Date(),
      options: { pollMs: 20, busyWaitMs: 10_000 },
      checks: unrecordedChecks(c.kube, { freshness: redisFreshnessCheck(redis.client, redis.prefix) }),
    });
    const run = async (a: Attempt) => {
      const r = recorder();
      await executor.execute(a, r.report, new AbortController().signal);
      return r;
    };
    const attempt = (commit: string, token: string, over: Partial<Attempt> = {}): Attempt => ({
      ...c.attempt(name, name, commit, token),
      branchKey,
      ...over,
    });
    /** The user's edit on the cluster, and its write accepted by the gateway: the inbox entry id. */
    const edit = async (value: string) => {
      const live = await core.readNamespacedConfigMap({ name: "settings", namespace: ns });
      await core.replaceNamespacedConfigMap({
        name: "settings",
        namespace: ns,
        body: { ...live, data: { value } },
        fieldManager: "kubectl-edit",
      });
      const write: AcceptedWrite = {
        id: `w-${randomUUID()}`,
        target: { namespace: "argocd", name: `${name}-target` },
        branchKey,
        path: `apps/${name}`,
        acceptedAt: new Date().toISOString(),
        author: { name: "Ada", email: "ada@example.com" },
        changes: [
          { op: "upsert", object: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "settings" } } },
        ],
      };
      const r = await acceptWrite(redis.client, redis.prefix, write, branches);
      if (!r.accepted) throw new Error("not accepted");
      return r.entryId;
    };

    await record(c1);
    expect((await run(attempt(c1, "t-1"))).phases().at(-1)).toBe("Succeeded");
    expect(await valueIn(ns)).toBe("v1");

    // The flush published c2 having read the inbox up to `mark`; then the user edits.
    await record(c2);
    const mark = await edit("v1");
    const editEntry = await edit("mine");
    const stale = attempt(c2, "t-2", { editsAfter: { mark, folders: [`apps/${name}`] } });
    const r = await run(stale);
    expect(r.phases()).toEqual(["Requested", "Stale"]);
    expect(r.reports.at(-1)?.extra.reason).toBe(StatusReason.EditedAfterFlush);
    expect(c.argo!.syncs({ namespace: "argocd", name })).toHaveLength(1); // the first one only
    expect((await c.getApp(name)).operation ?? undefined).toBeUndefined();
    expect(
      (await readOperation(c.kube, { type: RESOURCES.argoCDClaim, namespace: "argocd", name }))?.token,
    ).not.toBe(stale.token);
    expect(await valueIn(ns)).toBe("mine");

    // The worker flushes again: the commit holding the edit, sent with the mark past it.
    const c3 = await repo.push("cm.yaml", cm("settings", "mine"));
    await record(c3);
    const again = await run(
      attempt(c3, "t-3", { editsAfter: { mark: editEntry, folders: [`apps/${name}`] } }),
    );
    expect(again.phases().at(-1)).toBe("Succeeded");
    expect(c.argo!.syncs({ namespace: "argocd", name })).toHaveLength(2);
    expect(await valueIn(ns)).toBe("mine");
  });
});
