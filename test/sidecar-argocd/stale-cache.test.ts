/**
 * The Argo CD executor follows the Application from its watch's cache. A cache behind the API
 * server must never decide anything that refuses, fails or terminates by itself: each such
 * decision is taken again on a read from the API server. Here the executor's cache is held at an
 * old version of the Application for the whole operation (a watch that lags), while argosim and
 * the API server move on; every wait then ends on the safety net's read of the server.
 */
import { describe, expect, it } from "vitest";
import { type KObject, Kube } from "../../queue/kube/index.js";
import { cloneAncestry } from "../../sidecar/argocd/ancestry.js";

import type { ArgoCDExecutorOptions } from "../../sidecar/argocd/executor.js";
import { fileWorld } from "../support/file-world.js";
import { type Repo, startCluster, until } from "./harness.js";

let repo: Repo;
/** c1 ← c2 on main. */
let c1: string;
let c2: string;
let ancestry: ReturnType<typeof cloneAncestry>;

const c = fileWorld(async () => {
  const c = await startCluster({ argo: {} });
  [repo, c1, c2] = await c.history("v1", "v2");
  ancestry = cloneAncestry(await repo.clone());
  return c;
});

const setup = () => c.held("lag", repo);

/**
 * An executor whose watch shows `snapshot` for the Application whatever the server holds, and
 * which writes down every terminate it sends.
 */
function lagging(snapshot: KObject, options: ArgoCDExecutorOptions, terminates: string[]) {
  const kube = new (class extends Kube {
    override mergePatch<T>(...args: Parameters<Kube["mergePatch"]>): Promise<T> {
      if (JSON.stringify(args[3]).includes("Terminating")) terminates.push(args[2]);
      return super.mergePatch<T>(...args);
    }
  })(c.kc);
  const e = c.executor(
    // The safety net short: the lagging cache is never the only thing the executor reads.
    { pollMs: 20, resyncMs: 100, busyWaitMs: 10_000, budgetMs: 10_000, maxPollMs: 100, ...options },
    { kube },
  );
  e.applications.cached = (ref) => (ref.name === snapshot.metadata.name ? snapshot : undefined);
  return e;
}

const syncedBy = (name: string) =>
  c.argo!.syncs({ namespace: "argocd", name }).map((s) => [s.token, s.revision]);

describe("an Argo CD watch cache behind the API server", () => {
  it("our older operation still Running in the cache, ended on the server: nothing terminated, the newer commit synced", async () => {
    const { name } = await setup();
    const hold = await c.syncRunning(name, { commit: c1, token: "old" });
    // A proven-stale operation of ours, as the cache keeps showing it.
    const snapshot = await c.getApp(name);
    hold.release();
    await until(async () => !(await c.getApp(name)).operation, "the old sync to end on the server");
    const terminates: string[] = [];
    const r = await c.run(lagging(snapshot, { ancestry }, terminates), c.attempt(name, c2));
    expect(terminates).toEqual([]);
    expect(r.phases().at(-1)).toBe("Succeeded");
    expect(syncedBy(name)).toEqual([
      ["old", c1],
      [`t-${name}`, c2],
    ]);
    expect(
      c.events.events.some((e) => e.reason === "StaleOperationTerminated" && e.regarding.name === name),
    ).toBe(false);
  });

  it("automated sync on in the cache, held off on the server: not Rejected, synced once", async () => {
    const { name } = await setup();
    // The Application as the cache showed it before the claim switched automated sync off.
    const snapshot = structuredClone(await c.getApp(name));
    (snapshot.spec as { syncPolicy: Record<string, unknown> }).syncPolicy.automated = {
      enabled: true,
      prune: true,
    };
    const terminates: string[] = [];
    const r = await c.run(lagging(snapshot, {}, terminates), c.attempt(name, c2));
    expect(r.reports.map((x) => x.phase)).not.toContain("Rejected");
    expect(r.phases().at(-1)).toBe("Succeeded");
    expect(syncedBy(name)).toEqual([[`t-${name}`, c2]]);
  });

  it("an Unresolved sync the cache does not show: not Failed as removed, followed to Succeeded", async () => {
    const { name, ref } = await setup();
    // The cache never shows our update: the operation is absent there for the whole sync.
    const snapshot = await c.getApp(name);
    const hold = c.argo!.holdSync(ref);
    const terminates: string[] = [];
    const r = c.start(lagging(snapshot, { budgetMs: 300 }, terminates), c.attempt(name, c2));
    await until(async () => r.phases().includes("Unresolved") || r.phases().includes("Failed"), "Unresolved");
    hold.release();
    await r.done;
    expect(r.reports.filter((x) => x.extra.reason === "OperationRemoved")).toEqual([]);
    expect(r.phases().at(-1)).toBe("Succeeded");
    expect(syncedBy(name)).toEqual([[`t-${name}`, c2]]);
  });
});
