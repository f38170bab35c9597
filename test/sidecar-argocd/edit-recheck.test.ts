/**
 * The Argo CD edit recheck, just before the update that starts the sync: an API edit accepted into
 * the branch's inbox after the attempt's flush mark ends the attempt Stale (EditedAfterFlush),
 * record withdrawn and no sync, so the older commit never runs over the edit; the attempt for the
 * commit carrying the edit then syncs it. argosim over HTTP, the real Git server and real Redis.
 */
import { describe, expect, it } from "vitest";
import type { Attempt } from "../../queue/contract.js";
import { StatusReason } from "../../queue/crds/reasons.js";
import { RESOURCES } from "../../queue/kube/index.js";
import { readOperation } from "../../sidecar/operation-record.js";
import { redisFreshnessCheck } from "../../sidecar/tip-check.js";
import { fileWorld } from "../support/file-world.js";
import { startCluster } from "./harness.js";

const c = fileWorld(() => startCluster({ argo: {} }));

const valueIn = async (namespace: string) =>
  (await c.kube.core.readNamespacedConfigMap({ name: "settings", namespace }).catch(() => undefined))?.data
    ?.value;

describe("the Argo CD edit recheck", () => {
  it("an edit accepted after the flush mark ends the attempt Stale before the sync; the attempt carrying it syncs", async () => {
    const name = "editapp";
    const [repo, c1, c2] = await c.history("v1", "v2");
    const { ns } = await c.heldApp(name, repo);
    const branchKey = `${repo.url}@main`;
    const branch = await c.branchOwner(branchKey);
    const executor = c.executor(
      { pollMs: 20, busyWaitMs: 10_000 },
      { checks: { freshness: redisFreshnessCheck(c.redis.client, c.redis.prefix) } },
    );
    const run = (a: Attempt) => c.run(executor, a);
    const attempt = (commit: string, token: string, over: Partial<Attempt> = {}): Attempt => ({
      ...c.attempt(name, commit, token),
      branchKey,
      ...over,
    });
    /** The user's edit on the cluster, and its write accepted by the gateway: the inbox entry id. */
    const edit = async (value: string) => {
      await c.editConfigMap(ns, "settings", { value });
      return branch.acceptEdit({
        target: { namespace: "argocd", name: `${name}-target` },
        path: `apps/${name}`,
        configMap: "settings",
      });
    };

    await branch.record(c1);
    expect((await run(attempt(c1, "t-1"))).phases().at(-1)).toBe("Succeeded");
    expect(await valueIn(ns)).toBe("v1");

    // The flush published c2 having read the inbox up to `mark`; then the user edits.
    await branch.record(c2);
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
    const [c3] = await repo.settings("mine");
    await branch.record(c3);
    const again = await run(
      attempt(c3, "t-3", { editsAfter: { mark: editEntry, folders: [`apps/${name}`] } }),
    );
    expect(again.phases().at(-1)).toBe("Succeeded");
    expect(c.argo!.syncs({ namespace: "argocd", name })).toHaveLength(2);
    expect(await valueIn(ns)).toBe("mine");
  });
});
