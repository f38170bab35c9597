/**
 * The Argo CD executor asks the tip the branch worker recorded in Redis (redisTipCheck) after its
 * record and before it starts the sync: a moved tip withdraws the record and starts nothing.
 * argosim over HTTP, the real Git server and real Redis.
 */
import { describe, expect, it } from "vitest";
import { RESOURCES } from "../../queue/kube/index.js";
import { readOperation } from "../../sidecar/operation-record.js";
import { redisTipCheck } from "../../sidecar/tip-check.js";
import { fileWorld } from "../support/file-world.js";
import { type Repo, startCluster } from "./harness.js";

let repo: Repo;
let c1: string;
let c2: string;

const c = fileWorld(async () => {
  const c = await startCluster({ argo: {} });
  [repo, c1, c2] = await c.history("v1", "v2");
  return c;
});

describe("the recorded tip decides Stale for Argo CD", () => {
  it("an attempt for a commit that is no longer the recorded tip ends Stale: record withdrawn, no sync", async () => {
    const name = "tipapp";
    await c.heldApp(name, repo);
    const attempt = c.attempt(name, c1);
    await (await c.branchOwner(attempt.branchKey)).record(c2);
    const executor = c.executor(
      { pollMs: 20, busyWaitMs: 10_000 },
      { checks: { tip: redisTipCheck(c.redis.client, c.redis.prefix) } },
    );
    const r = await c.run(executor, attempt);
    expect(r.phases()).toEqual(["Requested", "Stale"]);
    expect(c.argo!.syncs({ namespace: "argocd", name })).toHaveLength(0);
    expect((await c.getApp(name)).operation ?? undefined).toBeUndefined();
    expect(
      await readOperation(c.kube, { type: RESOURCES.argoCDClaim, namespace: "argocd", name }),
    ).toBeUndefined();

    // At the recorded tip the same executor syncs.
    const r2 = await c.run(executor, c.attempt(name, c2, `t-${name}-2`));
    expect(r2.phases().at(-1)).toBe("Succeeded");
    expect(c.argo!.syncs({ namespace: "argocd", name })).toHaveLength(1);
  });
});
