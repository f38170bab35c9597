/**
 * Entries whose events the decisions must save: the watch plane's `done` marker of a GitTarget's
 * initial snapshots (it lifts the barrier) and a refusal notice (it asks for a Refusal apply).
 * With hooks that save entries (`savesEntries`, as the decisions' are), such an entry leaves the
 * inbox only once `saved` says its event is saved: an owner that stops after handing it on but
 * before the save leaves the entry, and the next owner hands it on again (soak --mirror seed
 * 131015: a graceful stop dropped the queued mark while its entry had already left, and the
 * GitTarget's applier waited behind the barrier for good).
 */
import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import type { AcceptedWrite, RefusalNotice } from "../../queue/contract.js";
import { appendNotice } from "../../queue/intake.js";
import { branchKeys } from "../../queue/keys.js";
import type { BranchHooks } from "../../queue/worker/branch-worker.js";
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

/** One case's entry, handed on: what names it, and its inbox entry. */
type Handed = { what: string; entryId: string };

/** The hooks of decisions that save entries, recording what each hands on. */
const saving = (into: Handed[]): BranchHooks => ({
  savesEntries: true,
  onInitialSnapshotsPublished: (p) => void into.push({ what: p.token, entryId: p.entryId }),
  onRefusal: (n, entryId) => void into.push({ what: n.id, entryId: entryId as string }),
});

describe("entries the decisions save, across a change of owner", () => {
  let h: Harness;
  afterEach(async () => {
    await h.close();
  });

  /** The first owner hands `what` on and stops before saving it; the next owner hands it on again. */
  const handedAgain = async (what: string, leftBehind: number) => {
    const first: Handed[] = [];
    const a = await h.newWorker({ replica: "r1", hooks: saving(first) });
    await waitFor("the entry handed to the first owner's decisions", () => first.length === 1);
    expect(first[0]?.what).toBe(what);
    await waitFor("the entries before it settled", async () => (await h.inboxLength()) === leftBehind);
    await a.stop();
    // Not saved: the entry is still in the inbox, for whoever owns the branch next.
    expect(await h.inboxLength()).toBe(leftBehind);

    // The replica gives the lease back once its worker stopped; the next owner reads the inbox.
    await h.redis.client.del(branchKeys(h.redis.prefix, h.key).lease);
    const second: Handed[] = [];
    const b = await h.newWorker({ replica: "r2", hooks: saving(second) });
    await waitFor("the entry handed to the next owner's decisions", () => second.length === 1);
    expect(second[0]).toEqual(first[0]);
    expect(await h.inboxLength()).toBe(leftBehind);
    expect(b.quiet()).toBe(false);
    // These decisions save it: the entry may leave.
    b.saved(second[0]?.entryId as string);
    await waitFor("the entry settled once saved", async () => (await h.inboxLength()) === 0);
    expect(b.quiet()).toBe(true);
  };

  it("a done marker's mark handed on but not saved when its owner stops is handed on again by the next owner (soak --mirror seed 131015)", async () => {
    h = await harness();
    expect(await h.accept(marker(h.key, "mirror:1", "started"))).toBe(true);
    expect(await h.accept(marker(h.key, "mirror:1", "done"))).toBe(true);
    await handedAgain("mirror:1", 1);
  });

  it("a refusal notice handed on but not saved when its owner stops is handed on again by the next owner", async () => {
    h = await harness();
    const refusal: RefusalNotice = {
      type: "refusal",
      id: "refusal-1",
      target: TARGET,
      branchKey: h.key,
      receivedAt: new Date().toISOString(),
      object: { apiVersion: "v1", kind: "ConfigMap", namespace: "web", name: "app" },
      reason: "denied by policy",
    };
    await appendNotice(h.redis.client, h.redis.prefix, h.key, "refusal", refusal);
    await handedAgain("refusal-1", 1);
  });

  it("with hooks that do not save entries, a marker's and a notice's entries leave once handed on", async () => {
    h = await harness();
    expect(await h.accept(marker(h.key, "mirror:2", "started"))).toBe(true);
    expect(await h.accept(marker(h.key, "mirror:2", "done"))).toBe(true);
    const handed: Handed[] = [];
    const w = await h.newWorker({ hooks: { ...saving(handed), savesEntries: false } });
    await waitFor("the mark handed on", () => handed.length === 1);
    await waitFor("both marker entries settled", async () => (await h.inboxLength()) === 0);
    expect(w.quiet()).toBe(true);
  });
});

describe("refusal notices in the inbox", () => {
  let h: Harness;
  afterEach(async () => {
    await h.close();
  });

  it("one naming an object its GitTarget may not hold is dropped: never handed on, its entry leaves", async () => {
    h = await harness();
    const notice = (id: string, object: RefusalNotice["object"]): RefusalNotice => ({
      type: "refusal",
      id,
      target: TARGET,
      branchKey: h.key,
      receivedAt: new Date().toISOString(),
      object,
      reason: "denied by policy",
    });
    const refused = [
      notice("foreign", { apiVersion: "v1", kind: "ConfigMap", namespace: "kube-system", name: "x" }),
      notice("cluster", { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", name: "admin" }),
      notice("privileged", { apiVersion: "v1", kind: "ServiceAccount", namespace: "web", name: "ci" }),
      notice("unstorable", { apiVersion: "v1", kind: "ConfigMap", namespace: "web", name: "../x" }),
      {
        ...notice("stranger", { apiVersion: "v1", kind: "ConfigMap", namespace: "web", name: "app" }),
        target: { namespace: "team", name: "other" },
      },
    ];
    for (const n of refused) await appendNotice(h.redis.client, h.redis.prefix, h.key, "refusal", n);
    await appendNotice(
      h.redis.client,
      h.redis.prefix,
      h.key,
      "refusal",
      notice("held", { apiVersion: "v1", kind: "ConfigMap", namespace: "web", name: "app" }),
    );
    const handed: Handed[] = [];
    const w = await h.newWorker({ hooks: { ...saving(handed), savesEntries: false } });
    await waitFor("the inbox drained", async () => (await h.inboxLength()) === 0);
    expect(handed.map((x) => x.what)).toEqual(["held"]);
    expect(w.quiet()).toBe(true);
  });
});
