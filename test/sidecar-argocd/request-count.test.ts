/**
 * What one sync costs the API server: the Argo CD executor follows the Application through the
 * watch of its namespace (listed and watched once, on the first sync there), so a sync costs the
 * same however long it runs. What remains per sync, 6 requests:
 * - the claim: one read, for the record, and three writes (the record, Running, the end), each
 *   later write made from the answer to the one before;
 * - the Application: the one update that starts the sync, guarded by the version the cache shows
 *   (a cache behind the server is a 409 that reads the server: see stale-cache.test.ts), and
 *   the refresh request once it ended, so Argo CD compares with the branch resolved anew
 *   (sync-status.test.ts).
 * No GET of the Application: progress and the outcome come from watch events, and a refusal, a
 * failure or a terminate is read again from the API server only when the cache would decide one.
 * The standing recheck reads the claim uncached by rule; it runs under another user, not counted.
 * `npm run bench -- argocd` measures the same through the executor host.
 */
import { describe, expect, it } from "vitest";
import { Kube } from "../../queue/kube/index.js";
import { fileWorld } from "../support/file-world.js";
import { type Repo, startCluster, until } from "./harness.js";

let repo: Repo;
const c = fileWorld(async () => {
  const c = await startCluster({ argo: {} });
  repo = await c.repo();
  return c;
});

/** Requests of one sync, the namespace's list and watch (made once, on the first sync) apart. */
const PER_SYNC = 6;

describe("the API requests of one Argo CD sync", () => {
  it("one claim read, three claim writes and the update; the Application is watched, never polled", async () => {
    const name = "counted";
    await c.heldApp(name, repo);
    const user = "count-argocd";
    c.api.addUser(user, `token-${user}`, "all");
    const kube = new Kube(c.api.kubeConfig(user));
    const apps = "/apis/argoproj.io/v1alpha1/namespaces/argocd/applications";
    try {
      // Polling every 50 ms would read the Application a dozen times while a sync is held.
      const executor = c.executor({ pollMs: 50 }, { kube, standingKube: c.kube });
      for (let i = 0; i < 3; i++) {
        const [commit] = await repo.settings(`n${i}`);
        const trace = c.api.traceRequests(user);
        // The later syncs are held running until Running is reported: a longer sync costs nothing more.
        const hold = i > 0 ? c.argo!.holdSync({ namespace: "argocd", name }) : undefined;
        const r = c.start(executor, c.attempt(name, commit, `count-${i}`));
        if (hold) {
          await until(async () => r.phases().includes("Running"), "Running reported");
          hold.release();
        }
        await r.done;
        trace.stop();
        const all = trace.requests.join("\n");
        expect(r.phases().at(-1)).toBe("Succeeded");
        const claim = trace.requests.filter((q) => q.includes("/argocdclaims/"));
        expect(
          claim.filter((q) => q.startsWith("GET ")),
          all,
        ).toHaveLength(1);
        // Record, Running, completion.
        expect(
          claim.filter((q) => q.startsWith("PATCH")),
          all,
        ).toHaveLength(3);
        // The list and watch once, on the first sync in the namespace; then the update and the refresh.
        const app = trace.requests.filter((q) => q.includes(apps));
        expect(app, all).toEqual([
          ...(i === 0 ? [`GET ${apps}`, `WATCH ${apps}`] : []),
          `PUT ${apps}/${name}`,
          `PATCH(merge) ${apps}/${name}`,
        ]);
        expect(trace.requests, all).toHaveLength(PER_SYNC + (i === 0 ? 2 : 0));
      }
    } finally {
      await kube.close();
    }
  });
});
