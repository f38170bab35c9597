/**
 * After a sync applygate started, Argo CD shows the Application Synced at the synced commit. The
 * sync is started as automated (so sync windows judge it as one), and after an automated sync the
 * controller compares against the branch as the repo-server last resolved it, cached for minutes
 * (real Argo CD v3.5.3, test/real/RESULTS.md "Argo CD: sync status after a pinned sync"): without
 * the refresh request the executor sends once the sync ended, the status stays OutOfSync at the
 * commit resolved before the push.
 */

import { describe, expect, it } from "vitest";
import { isRecord } from "../../queue/kube/index.js";
import { fileWorld } from "../support/file-world.js";
import { type Repo, startCluster, until } from "./harness.js";

let repo: Repo;
const c = fileWorld(async () => {
  const c = await startCluster();
  // The branch resolution is cached far longer than the test runs, and no timed refresh comes.
  await c.startArgo({ knobs: { revisionCacheMs: 3_600_000, refreshIntervalMs: 3_600_000 } });
  repo = await c.repo();
  return c;
});

const syncOf = async (name: string) => {
  const status = (await c.getApp(name)).status;
  return (isRecord(status) ? status.sync : undefined) as { status?: string; revision?: string } | undefined;
};

describe("Argo CD's view of an application applygate synced", () => {
  it("is Synced at the synced commit, not OutOfSync at the branch resolved before the push", async () => {
    const name = "viewed";
    await repo.settings("old");
    await c.heldApp(name, repo);
    // The controller has compared once: the branch is resolved (and cached) at the first commit.
    await until(async () => Boolean((await syncOf(name))?.revision), "first compare");
    const [commit] = await repo.settings("new");
    const r = await c.run(c.executor({ pollMs: 50 }), c.attempt(name, commit, "viewed-1"));
    expect(r.phases().at(-1)).toBe("Succeeded");
    await until(async () => {
      const sync = await syncOf(name);
      return sync?.status === "Synced" && sync.revision === commit;
    }, "Synced at the synced commit");
  });
});
