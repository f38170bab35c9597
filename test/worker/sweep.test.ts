/**
 * The branch worker's side of a snapshot's prune sweep: it reads the folder at the remote tip (the
 * first read if it has read nothing yet), turns the sweep into deletes of the files of objects
 * gone live, commits them like any write, and lets a sweep that finds nothing leave the inbox with
 * its charge and no commit.
 */
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { AcceptedWrite, SnapshotSweep } from "../../queue/contract.js";
import { branchKeys } from "../../queue/keys.js";
import { gitOk } from "../git/cli.js";
import { foreignCommit } from "./foreign.js";
import { configMapWrite, FOLDER, fileOf, type Harness, harness, TARGET, waitFor } from "./harness.js";

const cm = (name: string) =>
  `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${name}\n  namespace: web\n`;

const sweepWrite = (key: string, sweep: SnapshotSweep): AcceptedWrite => ({
  id: randomUUID(),
  target: TARGET,
  branchKey: key,
  path: FOLDER,
  acceptedAt: new Date().toISOString(),
  author: { name: "applygate-mirror", email: "applygate-mirror@cluster.local" },
  changes: [],
  sweep,
});

/** The server's tip of main: the commit the applier applied, in these tests. */
const tipOf = async (h: Harness) =>
  (await gitOk(["rev-parse", "refs/heads/main"], { cwd: join(h.server.root, "site.git") })).trim();

describe("a snapshot sweep in the branch worker", () => {
  let h: Harness;
  afterEach(async () => {
    await h.close();
  });

  it("deletes the gone objects' files in one commit, read from the tip before anything else was read", async () => {
    h = await harness({
      "README.md": "hi\n",
      [fileOf("a")]: cm("a"),
      [fileOf("b")]: cm("b"),
      [fileOf("c")]: cm("c"),
    });
    const before = (await h.log()).length;
    const w = sweepWrite(h.key, {
      apiVersion: "v1",
      kind: "ConfigMap",
      namespaces: ["web"],
      live: ["web/b"],
      appliedCommit: await tipOf(h),
    });
    expect(await h.accept(w)).toBe(true);
    await h.newWorker();
    await waitFor("the sweep published", async () => (await h.published(w.id)) !== null);
    expect(await h.file(fileOf("a"))).toBeUndefined();
    expect(await h.file(fileOf("b"))).toBeDefined();
    expect(await h.file(fileOf("c"))).toBeUndefined();
    expect((await h.log()).length).toBe(before + 1);
  });

  it("a sweep that finds nothing leaves the inbox with its charge and no commit, and is no commit boundary", async () => {
    h = await harness({ "README.md": "hi\n", [fileOf("a")]: cm("a") }, { idleMs: 5_000, maxMs: 20_000 });
    await h.newWorker();
    const before = (await h.log()).length;
    const first = configMapWrite(h.key, "x", "1");
    const empty = sweepWrite(h.key, {
      apiVersion: "v1",
      kind: "ConfigMap",
      namespaces: ["web"],
      live: ["web/a", "web/x"],
      appliedCommit: await tipOf(h),
    });
    const last = configMapWrite(h.key, "y", "1", { save: true });
    expect(await h.accept(first)).toBe(true);
    expect(await h.accept(empty)).toBe(true);
    expect(await h.accept(last)).toBe(true);
    await waitFor("the save published", async () => (await h.published(last.id)) !== null);
    // One author's window, unbroken by the sweep: both writes in one commit.
    expect((await h.log()).length).toBe(before + 1);
    expect(await h.file(fileOf("a"))).toBeDefined();
    await waitFor("every charge returned", async () => {
      const intake = await h.redis.client.hgetall(branchKeys(h.redis.prefix, h.key).intake);
      return Number(intake.charged ?? 0) === 0;
    });
  });

  it("sweeps only files Git held at the applied commit: one added since, never applied, stays", async () => {
    h = await harness({ "README.md": "hi\n", [fileOf("gone")]: cm("gone") });
    const applied = await tipOf(h);
    // Git ahead of the cluster: a later commit adds an object the applier has not applied yet.
    await foreignCommit(join(h.server.root, "site.git"), fileOf("fresh"), cm("fresh"));
    const w = sweepWrite(h.key, {
      apiVersion: "v1",
      kind: "ConfigMap",
      namespaces: ["web"],
      live: [],
      appliedCommit: applied,
    });
    expect(await h.accept(w)).toBe(true);
    await h.newWorker();
    await waitFor("the sweep published", async () => (await h.published(w.id)) !== null);
    expect(await h.file(fileOf("gone"))).toBeUndefined();
    expect(await h.file(fileOf("fresh"))).toBeDefined();
  });

  it("without an applied commit, or with one the clone does not hold, a sweep deletes nothing", async () => {
    h = await harness(
      { "README.md": "hi\n", [fileOf("gone")]: cm("gone") },
      { idleMs: 5_000, maxMs: 20_000 },
    );
    await h.newWorker();
    const before = (await h.log()).length;
    const sweep = { apiVersion: "v1", kind: "ConfigMap", namespaces: ["web"], live: [] };
    const none = sweepWrite(h.key, sweep);
    const unknown = sweepWrite(h.key, { ...sweep, appliedCommit: "0".repeat(40) });
    const last = configMapWrite(h.key, "y", "1", { save: true });
    for (const w of [none, unknown, last]) expect(await h.accept(w)).toBe(true);
    await waitFor("the save published", async () => (await h.published(last.id)) !== null);
    expect(await h.file(fileOf("gone"))).toBeDefined();
    expect((await h.log()).length).toBe(before + 1);
  });
});
