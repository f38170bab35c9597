/**
 * The watch plane's `done` marker of a GitTarget's initial snapshots lifts the decisions' barrier.
 * Its inbox entry leaves only once the decisions say they saved the mark: an owner that stops
 * after handing the mark on but before it is saved leaves the entry, and the next owner hands the
 * mark on again (soak --mirror seed 131015: a graceful stop dropped the queued mark while its
 * entry had already left, and the GitTarget's applier waited behind the barrier for good).
 */
import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import type { AcceptedWrite } from "../../queue/contract.js";
import { branchKeys } from "../../queue/keys.js";
import { FOLDER, type Harness, harness, TARGET, waitFor } from "./harness.js";

const marker = (key: string, token: string, phase: "started" | "done"): AcceptedWrite => ({
  id: `m-${randomUUID()}`,
  target: TARGET,
  branchKey: key,
  path: FOLDER,
  acceptedAt: new Date().toISOString(),
  author: { name: "applygate-mirror", email: "applygate-mirror@cluster.local" },
  changes: [],
  initialSnapshots: { token, phase },
});

type Handed = { token: string; entryId: string };

describe("an initial-snapshot mark across a change of owner", () => {
  let h: Harness;
  afterEach(async () => {
    await h.close();
  });

  it("a mark handed on but not saved when its owner stops is handed on again by the next owner (soak --mirror seed 131015)", async () => {
    h = await harness();
    const token = "mirror:1";
    expect(await h.accept(marker(h.key, token, "started"))).toBe(true);
    expect(await h.accept(marker(h.key, token, "done"))).toBe(true);

    // The first owner's decisions are handed the mark and stop before saving it: no acknowledgement.
    const first: Handed[] = [];
    const a = await h.newWorker({
      replica: "r1",
      hooks: { onInitialSnapshotsPublished: (p) => void first.push({ token: p.token, entryId: p.entryId }) },
    });
    await waitFor("the mark handed to the first owner's decisions", () => first.length === 1);
    expect(first[0]?.token).toBe(token);
    await waitFor("the started marker's entry settled", async () => (await h.inboxLength()) === 1);
    await a.stop();
    // The done marker's entry is still in the inbox, for whoever owns the branch next.
    expect(await h.inboxLength()).toBe(1);

    // The replica gives the lease back once its worker stopped; the next owner reads the inbox.
    await h.redis.client.del(branchKeys(h.redis.prefix, h.key).lease);
    const second: Handed[] = [];
    const b = await h.newWorker({
      replica: "r2",
      hooks: { onInitialSnapshotsPublished: (p) => void second.push({ token: p.token, entryId: p.entryId }) },
    });
    await waitFor("the mark handed to the next owner's decisions", () => second.length === 1);
    expect(second[0]).toEqual(first[0]);
    expect(await h.inboxLength()).toBe(1);
    expect(b.quiet()).toBe(false);
    // These decisions save it: the entry may leave.
    b.snapshotsRecorded(second[0]?.entryId as string);
    await waitFor("the marker's entry settled once saved", async () => (await h.inboxLength()) === 0);
    expect(b.quiet()).toBe(true);
  });

  it("without decisions to save it, a mark's entry leaves as soon as it is settled", async () => {
    h = await harness();
    expect(await h.accept(marker(h.key, "mirror:2", "started"))).toBe(true);
    expect(await h.accept(marker(h.key, "mirror:2", "done"))).toBe(true);
    const w = await h.newWorker({ hooks: {} });
    await waitFor("both marker entries settled", async () => (await h.inboxLength()) === 0);
    expect(w.quiet()).toBe(true);
  });
});
