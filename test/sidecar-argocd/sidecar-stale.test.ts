/**
 * Seed 002 end to end: a sidecar started through startSidecar, given no ancestry function and no
 * clone, proves from its own clone (fetched through the claim's GitTarget and GitProvider) that
 * our running operation is stale, terminates it, and syncs the newer commit.
 */
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as k8s from "@kubernetes/client-node";
import { expect, it } from "vitest";
import { fileWorld } from "../support/file-world.js";
import { heldApplication, startCluster, until } from "./harness.js";

let cacheDir: string;

const c = fileWorld(async () => {
  const c = await startCluster({ argo: {} });
  cacheDir = await mkdtemp(join(tmpdir(), "sidecar-cache-"));
  c.onStop(() => rm(cacheDir, { recursive: true, force: true }));
  await c.startSidecar({
    applier: "argocd",
    resyncMs: 200,
    cacheDir,
    options: { pollMs: 20, busyWaitMs: 10_000, budgetMs: 10_000, maxPollMs: 100, watchKinds: [] },
  });
  return c;
});

it("terminates our running operation for a proven ancestor and syncs the newer commit", async () => {
  const name = "web";
  const { repo } = await heldApplication(c, name);
  // Pushed after the sidecar started, so its clone can only learn them by fetching.
  const [c1, c2] = await repo.settings("v1", "v2");

  // Our earlier sync of c1, held Running by Argo CD.
  const ref = { namespace: "argocd", name };
  const hold = await c.syncRunning(name, { commit: c1, token: "old" });

  await c.queues.send({ ...c.attempt(name, c2, "new"), branchKey: `${repo.url}@main`, repository: repo.url });

  await until(
    async () => c.argo!.syncs(ref).some((s) => s.token === "new" && s.revision === c2),
    "the newer commit synced",
  );
  expect(c.argo!.syncs(ref).map((s) => s.token)).not.toContain("old");
  const events = await c.kc.makeApiClient(k8s.EventsV1Api).listNamespacedEvent({ namespace: "argocd" });
  expect(events.items.filter((e) => e.reason === "StaleOperationTerminated").map((e) => e.note)).toEqual([
    `terminated applygate operation old for ${c1}, an ancestor of ${c2}`,
  ]);
  // The proof came from the sidecar's own clone under its cache folder.
  expect((await readdir(cacheDir)).length).toBe(1);
  hold.release();
});
