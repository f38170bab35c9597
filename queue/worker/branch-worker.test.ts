import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { foreignCommit } from "../../test/worker/foreign.js";
import {
  configMapWrite,
  FOLDER,
  fileOf,
  type Harness,
  harness,
  TARGET,
  waitFor,
} from "../../test/worker/harness.js";
import { branchKeys } from "../keys.js";
import type { BranchWorker, WriteDecided } from "./branch-worker.js";
import { noMetrics } from "./metrics.js";
import { MemoryStatusSink } from "./status.js";

describe("branch worker: pending writes become commits", () => {
  let h: Harness;
  afterEach(async () => {
    await h.close();
  });

  it("gathers a window's writes into one commit, publishes it and forgets the writes", async () => {
    h = await harness();
    const status = new MemoryStatusSink();
    await h.newWorker({ status });
    const writes = [
      configMapWrite(h.key, "a", "1"),
      configMapWrite(h.key, "b", "2"),
      configMapWrite(h.key, "a", "3"),
    ];
    for (const w of writes) expect(await h.accept(w)).toBe(true);
    const commit = await waitFor("publication", () => h.published(writes[2]!.id));
    expect(await h.server.tip("site")).toBe(commit);
    for (const w of writes) expect(await h.published(w.id)).toBe(commit);
    expect(await h.log()).toEqual(["Update team/site (3 writes)", "initial content"]);
    expect(await h.file(fileOf("a"))).toContain('value: "3"');
    expect(await h.file(fileOf("b"))).toContain('value: "2"');
    await waitFor("inbox emptied", async () => (await h.inboxLength()) === 0);
    await waitFor(
      "status",
      () => status.byTarget.get(`${TARGET.namespace}/${TARGET.name}`)?.commit === commit,
    );
    expect(status.byTarget.get("team/site")?.state).toBe("Published");
  });

  it("tells its decisions each edited object with when the edit was made and when its write was accepted", async () => {
    h = await harness();
    const decided: WriteDecided[] = [];
    await h.newWorker({ hooks: { onWriteDecided: (w) => void decided.push(w) } });
    const first = configMapWrite(h.key, "a", "1");
    const second = configMapWrite(h.key, "b", "2");
    second.editedAt = "2026-12-02T06:11:30Z";
    for (const w of [first, second]) expect(await h.accept(w)).toBe(true);
    await waitFor("publication", () => h.published(second.id));
    // Judged against the apply windows open when each write arrived, not when its window closed
    // (docs/design/decisions.md, the apply window).
    expect(decided.flatMap((d) => d.editedObjects)).toEqual([
      {
        ref: expect.objectContaining({ name: "a" }),
        editedAt: first.acceptedAt,
        acceptedAt: first.acceptedAt,
      },
      {
        ref: expect.objectContaining({ name: "b" }),
        editedAt: "2026-12-02T06:11:30Z",
        acceptedAt: second.acceptedAt,
      },
    ]);
  });

  it("tells its decisions of a write waiting in an open window before the window closes; a save only once decided", async () => {
    h = await harness();
    const told: string[] = [];
    await h.newWorker({
      hooks: {
        onWriteGathered: (w) => void told.push(`gathered ${w.editedObjects.map((e) => e.ref.name).join()}`),
        onWriteDecided: (w) => void told.push(`decided ${w.editedObjects.map((e) => e.ref.name).join()}`),
      },
    });
    const waits = configMapWrite(h.key, "a", "1");
    expect(await h.accept(waits)).toBe(true);
    await waitFor("publication", () => h.published(waits.id));
    const saved = configMapWrite(h.key, "b", "2", { save: true });
    expect(await h.accept(saved)).toBe(true);
    await waitFor("publication", () => h.published(saved.id));
    expect(told).toEqual(["gathered a", "decided a", "decided b"]);
    // Each write waiting in a window is told once, in order (those read together in one announcement).
    told.length = 0;
    const burst = [configMapWrite(h.key, "c", "3"), configMapWrite(h.key, "d", "4")];
    for (const w of burst) expect(await h.accept(w)).toBe(true);
    await waitFor("publication", () => h.published(burst[1]!.id));
    const gathered = told.filter((t) => t.startsWith("gathered ")).flatMap((t) => t.slice(9).split(","));
    expect(gathered).toEqual(["c", "d"]);
  });

  it("answers a flush while a status write is still waiting on the API server", async () => {
    h = await harness();
    // A sink whose writes hang until released: an API server that does not answer.
    let release: () => void = () => {};
    const hung = new Promise<void>((r) => {
      release = r;
    });
    const reports: string[] = [];
    const worker = await h.newWorker({
      status: {
        async report(_targets, r) {
          reports.push(r.state);
          await hung;
        },
      },
    });
    await waitFor("the first status write under way", () => reports.length > 0);
    const put = configMapWrite(h.key, "a", "1");
    expect(await h.accept(put)).toBe(true);
    const flushed = await worker.flush();
    expect(flushed.ok).toBe(true);
    expect(await h.published(put.id)).toBe(flushed.ok ? flushed.tip : undefined);
    release();
    // The status catches up once the API server answers: the report after the flush is written.
    await waitFor("the status after the flush", () => reports.length >= 2);
  });

  it("closes the window at once on a save, and a delete removes the file", async () => {
    h = await harness(undefined, { idleMs: 60_000, maxMs: 60_000 });
    await h.newWorker();
    const put = configMapWrite(h.key, "a", "1", { save: true, message: "add a" });
    await h.accept(put);
    await waitFor("save published", () => h.published(put.id));
    const del = configMapWrite(h.key, "a", "", { save: true, message: "remove a" });
    del.changes = [
      { op: "delete", ref: { apiVersion: "v1", kind: "ConfigMap", namespace: "web", name: "a" } },
    ];
    await h.accept(del);
    await waitFor("delete published", () => h.published(del.id));
    expect(await h.file(fileOf("a"))).toBeUndefined();
    expect(await h.log()).toEqual(["remove a", "add a", "initial content"]);
  });

  it("keeps a saved state as its own commit when the next write arrives in the same inbox read", async () => {
    h = await harness(undefined, { idleMs: 60_000, maxMs: 60_000 });
    // Both writes wait in the inbox before the worker starts, so one read takes them together.
    const saved = configMapWrite(h.key, "a", "1", { save: true, message: "save a=1" });
    const next = configMapWrite(h.key, "a", "2", { save: true, message: "save a=2" });
    await h.accept(saved);
    await h.accept(next);
    await h.newWorker();
    const first = await waitFor("the first save published", () => h.published(saved.id));
    const second = await waitFor("the second save published", () => h.published(next.id));
    expect(first).not.toBe(second);
    expect(await h.log()).toEqual(["save a=2", "save a=1", "initial content"]);
  });

  describe("a write that names its change with a base", () => {
    const cm = (data: Record<string, string>) => ({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "a", namespace: "web" },
      data,
    });
    const upsert = (data: Record<string, string>, base?: Record<string, string>, message?: string) =>
      configMapWrite(h.key, "a", "", {
        save: true,
        ...(message ? { message } : {}),
        changes: [{ op: "upsert", object: cm(data), ...(base ? { base: cm(base) } : {}) }],
      });

    it("stores only the change: a field the writer copied from the cluster keeps Git's value (seed 5126)", async () => {
      h = await harness(undefined, { idleMs: 60_000, maxMs: 60_000 });
      await h.newWorker();
      const e2 = upsert({ greeting: "e2", note: "n1" }, undefined, "set greeting to e2");
      await h.accept(e2);
      await waitFor("e2 published", () => h.published(e2.id));
      // The cluster holds p1, a late apply over e2 that Git never took; the note's writer reports
      // the object as it saw it, before and after its own edit.
      const n3 = upsert({ greeting: "p1", note: "n3" }, { greeting: "p1", note: "n1" }, "set note to n3");
      await h.accept(n3);
      await waitFor("n3 published", () => h.published(n3.id));
      const file = (await h.file(fileOf("a"))) as string;
      expect(file).toContain("greeting: e2");
      expect(file).toContain("note: n3");
      // A field the writer removed is removed; one it added is added.
      const removed = upsert({ greeting: "p1", extra: "x" }, { greeting: "p1", note: "n3" }, "drop the note");
      await h.accept(removed);
      await waitFor("removal published", () => h.published(removed.id));
      const after = (await h.file(fileOf("a"))) as string;
      expect(after).toContain("greeting: e2");
      expect(after).toContain("extra: x");
      expect(after).not.toContain("note:");
      expect(await h.log()).toEqual([
        "drop the note",
        "set note to n3",
        "set greeting to e2",
        "initial content",
      ]);
    });

    it("carries each write of one window over the one before, and keeps a whole write without a base whole", async () => {
      h = await harness(undefined, { idleMs: 60_000, maxMs: 60_000 });
      const first = upsert({ greeting: "g1", note: "n1" });
      const greeting = {
        ...upsert({ greeting: "g2", note: "stale" }, { greeting: "g1", note: "stale" }),
        save: false,
      };
      const note = upsert({ greeting: "stale", note: "n2" }, { greeting: "stale", note: "n1" }, "two edits");
      for (const w of [first, greeting, note]) await h.accept(w);
      await h.newWorker();
      await waitFor("the window published", () => h.published(note.id));
      const file = (await h.file(fileOf("a"))) as string;
      expect(file).toContain("greeting: g2");
      expect(file).toContain("note: n2");
      const whole = upsert({ greeting: "g3" });
      await h.accept(whole);
      await waitFor("the whole write published", () => h.published(whole.id));
      const last = (await h.file(fileOf("a"))) as string;
      expect(last).toContain("greeting: g3");
      expect(last).not.toContain("note:");
    });

    /** A worker publishing on flush only, with the object at g0/n0 published by "start", the commit applied. */
    const started = async () => {
      h = await harness(undefined, { idleMs: 60_000, maxMs: 60_000 });
      const worker = await h.newWorker({ autoPublish: false });
      await h.accept(upsert({ greeting: "g0", note: "n0" }, undefined, "start"));
      await worker.flush();
      return { worker, applied: (await h.server.tip("site")) as string };
    };
    /** A snapshot's write of the object as the cluster holds it, stamped as the mirror does. */
    const snapshotOf = (
      id: string,
      data: Record<string, string>,
      stamp: { appliedCommits?: string[]; gitAhead?: boolean } = {},
    ) => ({
      ...upsert(data),
      save: false,
      snapshot: { id, epoch: 1, gitAhead: stamp.gitAhead ?? false, initial: true, ...stamp },
    });
    /** Hands a write to the worker and waits until it sits in the open window. */
    const read = async (worker: BranchWorker, w: ReturnType<typeof upsert>) => {
      await h.accept(w);
      await waitFor(`${w.id} read`, () => worker.snapshot().openWindows === 1);
    };
    /** A foreign push of the object's file, observed by the worker. */
    const pushed = async (worker: BranchWorker, data: { greeting: string; note: string }) => {
      const commit = await foreignCommit(
        join(h.server.root, "site.git"),
        fileOf("a"),
        `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: web\ndata:\n  greeting: ${data.greeting}\n  note: ${data.note}\n`,
      );
      worker.observeSoon();
      await waitFor("the push observed", () => worker.snapshot().remoteTip === commit);
      return commit;
    };
    const file = async () => (await h.file(fileOf("a"))) as string;

    it("a snapshot's object changes only what differs from the tip it was read at: a push meanwhile is kept (soak --mirror seed 31042)", async () => {
      const { worker } = await started();
      // The snapshot saw the cluster as Git had it (g0), but for the note (drift: n1).
      await read(worker, snapshotOf("s-n1", { greeting: "g0", note: "n1" }));
      // A push lands while the write waits for its commit.
      await pushed(worker, { greeting: "p2", note: "n0" });
      expect((await worker.flush()).ok).toBe(true);
      // The push's greeting is kept; the snapshot's drift is carried over it.
      expect(await file()).toContain("greeting: p2");
      expect(await file()).toContain("note: n1");
      // A snapshot equal to the tip it was read at changes nothing, whatever Git took since.
      const same = snapshotOf("s-same", { greeting: "p2", note: "n1" });
      await read(worker, same);
      await pushed(worker, { greeting: "p3", note: "n1" });
      const after = await worker.flush();
      expect(after.ok && (await h.published(same.id))).toBe(after.ok ? after.tip : false);
      expect(await file()).toContain("greeting: p3");
      // The first snapshot's commit (its drift), the pushes, and nothing of the second.
      expect(await h.log()).toEqual([
        `foreign ${fileOf("a")}`,
        `Update ${TARGET.namespace}/${TARGET.name} (1 write)`,
        `foreign ${fileOf("a")}`,
        "start",
        "initial content",
      ]);
    });

    it("an initial snapshot taken while a push is not applied keeps the push and carries only the cluster's edits (soak --mirror seeds 42035, 51030, 51034)", async () => {
      const { worker, applied } = await started();
      // A push of the note lands, not applied yet.
      await pushed(worker, { greeting: "g0", note: "p1" });
      // A mirror restarted now sees the cluster on "start", with a greeting edited while it was down.
      const ahead = (appliedCommits?: string[]) => ({
        gitAhead: true,
        ...(appliedCommits ? { appliedCommits } : {}),
      });
      await read(worker, snapshotOf("s-1", { greeting: "e1", note: "n0" }, ahead([applied])));
      expect((await worker.flush()).ok).toBe(true);
      expect(await file()).toContain("greeting: e1");
      expect(await file()).toContain("note: p1");
      // The applier's own state, snapshot again, changes nothing; a commit the clone lacks is passed over.
      const same = snapshotOf("s-2", { greeting: "e1", note: "n0" }, ahead(["0".repeat(40), applied]));
      await read(worker, same);
      const after = await worker.flush();
      expect(after.ok && (await h.published(same.id))).toBe(after.ok ? after.tip : false);
      // Without the applied commit, the tip alone is the base: the note the cluster lacks is undone.
      await read(worker, snapshotOf("s-3", { greeting: "e1", note: "n0" }, ahead()));
      expect((await worker.flush()).ok).toBe(true);
      expect(await file()).toContain("note: n0");
      expect(await h.log()).toEqual([
        `Update ${TARGET.namespace}/${TARGET.name} (1 write)`,
        `Update ${TARGET.namespace}/${TARGET.name} (1 write)`,
        `foreign ${fileOf("a")}`,
        "start",
        "initial content",
      ]);
    });

    it("a snapshot in the inbox before the worker's first look at the remote is judged against the tip it then reads (soak --mirror seed 71015)", async () => {
      h = await harness(undefined, { idleMs: 60_000, maxMs: 60_000 });
      const bare = join(h.server.root, "site.git");
      const yaml = (greeting: string) =>
        `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: web\ndata:\n  greeting: ${greeting}\n  note: n0\n`;
      await foreignCommit(bare, fileOf("a"), yaml("g0"));
      // A mirror's snapshot of the applier's state waits in the inbox while the worker restarts.
      const seen = snapshotOf("s-early", { greeting: "g0", note: "n0" });
      await h.accept(seen);
      const worker = await h.newWorker({ autoPublish: false });
      await waitFor("the snapshot read", () => worker.snapshot().openWindows === 1);
      // A push lands before the window closes.
      await pushed(worker, { greeting: "p1", note: "n0" });
      const after = await worker.flush();
      expect(after.ok && (await h.published(seen.id))).toBe(after.ok ? after.tip : false);
      expect(await file()).toContain("greeting: p1");
      expect(await h.log()).toEqual([`foreign ${fileOf("a")}`, `foreign ${fileOf("a")}`, "initial content"]);
    });

    it("a snapshot's edit back to the applied commit's value is an edit when only our own publications changed the file since", async () => {
      const { worker, applied } = await started();
      // An API edit, published (not applied: nothing asks for an apply of our own publication).
      await h.accept(
        upsert({ greeting: "e1", note: "n0" }, { greeting: "g0", note: "n0" }, "set greeting to e1"),
      );
      await worker.flush();
      // While the mirror was down, somebody set the greeting back to g0; its snapshot sees that.
      await read(worker, snapshotOf("s-back", { greeting: "g0", note: "n0" }, { appliedCommits: [applied] }));
      expect((await worker.flush()).ok).toBe(true);
      expect(await file()).toContain("greeting: g0");
      expect(await h.log()).toEqual([
        `Update ${TARGET.namespace}/${TARGET.name} (1 write)`,
        "set greeting to e1",
        "start",
        "initial content",
      ]);
    });

    it("stores a write with a base whole when Git holds no file for its object", async () => {
      h = await harness(undefined, { idleMs: 60_000, maxMs: 60_000 });
      await h.newWorker();
      const created = upsert({ greeting: "g1", note: "n1" }, { greeting: "g0" });
      await h.accept(created);
      await waitFor("published", () => h.published(created.id));
      const file = (await h.file(fileOf("a"))) as string;
      expect(file).toContain("greeting: g1");
      expect(file).toContain("note: n1");
    });
  });

  it("makes no commit for a write that changes nothing, and none when a published write is replayed", async () => {
    h = await harness(undefined, { idleMs: 20, maxMs: 100 });
    await h.newWorker();
    const w = configMapWrite(h.key, "a", "1", { save: true });
    await h.accept(w);
    const first = await waitFor("first", () => h.published(w.id));
    const same = configMapWrite(h.key, "a", "1", { save: true });
    await h.accept(same);
    expect(await waitFor("no-op settled", () => h.published(same.id))).toBe(first);
    // The gateway's retry of an accepted write (same id) after it was published.
    await h.accept(w);
    await waitFor("replay settled", async () => (await h.inboxLength()) === 0);
    expect(await h.log()).toHaveLength(2);
  });

  it("flush closes open windows and returns the tip its publication produced", async () => {
    h = await harness(undefined, { idleMs: 60_000, maxMs: 60_000 });
    const worker = await h.newWorker({ autoPublish: false });
    const w = configMapWrite(h.key, "a", "1");
    await h.accept(w);
    await waitFor("write read", () => worker.snapshot().openWindows === 1);
    const result = await worker.flush();
    expect(result.ok).toBe(true);
    expect(result.ok && result.tip).toBe(await h.server.tip("site"));
    expect(await h.published(w.id)).toBe(result.ok ? result.tip : "");
  });

  it("a flush answers with its inbox mark: every write read up to it is in the tip, a later one is not", async () => {
    h = await harness(undefined, { idleMs: 60_000, maxMs: 120_000 });
    const worker = await h.newWorker({ autoPublish: false });
    const first = configMapWrite(h.key, "a", "1");
    expect(await h.accept(first)).toBe(true);
    await waitFor("the write read into a window", () => worker.snapshot().openWindows === 1);
    const inbox = branchKeys(h.redis.prefix, h.key).inbox;
    const [[entry]] = (await h.redis.client.xrange(inbox, "-", "+")) as [[string, string[]]];
    const flushed = await worker.flush();
    expect(flushed).toMatchObject({ ok: true, inboxMark: entry });
    expect(await h.published(first.id)).toBe(flushed.ok ? flushed.tip : "");
    // A write accepted after the flush comes after its mark in the inbox.
    expect(await h.accept(configMapWrite(h.key, "b", "2"))).toBe(true);
    const later = (await h.redis.client.xrange(inbox, `(${entry}`, "+")) as Array<[string, string[]]>;
    expect(later).toHaveLength(1);
  });

  it("a suspended GitTarget's writes are kept and charged but never published, until it resumes", async () => {
    h = await harness(undefined, { idleMs: 20, maxMs: 100 });
    const target = h.spec.targets[0]!;
    const worker = await h.newWorker({ spec: { ...h.spec, targets: [{ ...target, suspended: true }] } });
    const w = configMapWrite(h.key, "a", "1", { save: true });
    const before = await h.server.tip("site");
    expect(await h.accept(w)).toBe(true);
    await waitFor("write held frozen", () => worker.snapshot().frozenWrites === 1);
    // A flush (what an apply asks for) publishes nothing of a frozen folder.
    const flushed = await worker.flush();
    expect(flushed).toMatchObject({ ok: true, tip: before });
    expect(await h.published(w.id)).toBeNull();
    expect(worker.snapshot()).toMatchObject({ retainedWrites: 1, pendingWrites: 0, openWindows: 0 });
    expect(worker.snapshot().retainedBytes).toBeGreaterThan(0);
    // Resumed: published in order, as if it had just arrived.
    worker.updateTargets([{ ...target, suspended: false }]);
    const commit = await waitFor("published after resume", () => h.published(w.id));
    expect(await h.server.tip("site")).toBe(commit);
    expect(worker.snapshot().frozenWrites).toBe(0);
  });

  it("a window open when its GitTarget is suspended is frozen with it", async () => {
    h = await harness(undefined, { idleMs: 60_000, maxMs: 60_000 });
    const target = h.spec.targets[0]!;
    const worker = await h.newWorker({ autoPublish: false });
    const w = configMapWrite(h.key, "a", "1");
    await h.accept(w);
    await waitFor("window open", () => worker.snapshot().openWindows === 1);
    worker.updateTargets([{ ...target, suspended: true }]);
    expect(worker.snapshot()).toMatchObject({ openWindows: 0, frozenWrites: 1 });
    await worker.flush();
    expect(await h.published(w.id)).toBeNull();
    worker.updateTargets([target]);
    const result = await worker.flush();
    expect(result.ok && (await h.published(w.id))).toBe(result.ok ? result.tip : "");
  });
});

describe("branch worker: no write can block the branch", () => {
  let h: Harness;
  afterEach(async () => {
    await h.close();
  });

  it("settles a poison write injected past the door as refused while the writes around it publish", async () => {
    h = await harness(undefined, { idleMs: 20, maxMs: 100 });
    // The target may hold ClusterRoles, so only storability refuses the `.git:` name.
    h.spec.targets[0]!.scope.kinds.push({ group: "rbac.authorization.k8s.io", kind: "ClusterRole" });
    const status = new MemoryStatusSink();
    const notices: string[] = [];
    const metrics = {
      ...noMetrics,
      refused: (_b: string, t: string, r: string) => notices.push(`metric ${t} ${r}`),
    };
    await h.newWorker({
      status,
      metrics,
      hooks: { onRefusal: (n) => void notices.push(`notice ${n.object.kind} ${n.object.name}`) },
    });
    const before = configMapWrite(h.key, "before", "1", { save: true });
    // Straight into the inbox, as no door would let them: a name Git cannot store, an object
    // outside the target's scope, and a folder the layout accepts but Git refuses at commit time.
    const gitName = configMapWrite(h.key, "x", "", { save: true });
    gitName.changes = [
      {
        op: "upsert",
        object: {
          apiVersion: "rbac.authorization.k8s.io/v1",
          kind: "ClusterRole",
          metadata: { name: ".git:x" },
        },
      },
    ];
    const foreign = configMapWrite(h.key, "evil", "1", { save: true });
    (foreign.changes[0] as { object: { metadata: { namespace: string } } }).object.metadata.namespace =
      "kube-system";
    const atCommit = configMapWrite(h.key, "deep", "1", { save: true, path: ".git/hooks" });
    const after = configMapWrite(h.key, "after", "2", { save: true });
    for (const w of [before, gitName, foreign, atCommit, after]) expect(await h.accept(w)).toBe(true);

    const tip = await waitFor("the write after the poison published", () => h.published(after.id));
    expect(await h.published(before.id)).toMatch(/^[0-9a-f]{40}$/);
    expect(await h.published(gitName.id)).toMatch(
      /^refused: Unstorable: changes\.0\.object\.metadata\.name: /,
    );
    expect(await h.published(foreign.id)).toMatch(/^refused: ForeignNamespace: ConfigMap kube-system\/evil/);
    expect(await h.published(atCommit.id)).toMatch(/^refused: CommitFailed: commit failed: /);
    expect(await h.server.tip("site")).toBe(tip);
    expect(await h.file(fileOf("before"))).toContain('value: "1"');
    expect(await h.file(fileOf("after"))).toContain('value: "2"');
    expect(await h.file(`${FOLDER}/core/configmap/kube-system/evil.yaml`)).toBeUndefined();
    await waitFor("inbox emptied", async () => (await h.inboxLength()) === 0);
    await waitFor("status", () => status.byTarget.get("team/site")?.commit === tip);
    expect(status.byTarget.get("team/site")?.state).toBe("Published");
    expect(status.refusals.get("team/site")?.map((r) => r?.reason)).toEqual([
      "Unstorable",
      "ForeignNamespace",
      "CommitFailed",
      undefined, // the write after them published: WriteRefused back to False
    ]);
    expect(notices.filter((n) => n.startsWith("metric"))).toEqual([
      "metric team/site Unstorable",
      "metric team/site ForeignNamespace",
      "metric team/site CommitFailed",
    ]);
    expect(notices).toContain("notice ClusterRole .git:x");

    // The branch goes on: a later write publishes too.
    const later = configMapWrite(h.key, "later", "3", { save: true });
    await h.accept(later);
    await waitFor("later published", () => h.published(later.id));
  });

  it("a flush while a failed publication waits for its retry spends no push", async () => {
    h = await harness(undefined, { idleMs: 20, maxMs: 100 });
    const worker = await h.newWorker();
    await waitFor("baseline", () => worker.snapshot().remoteTip !== undefined);
    h.server.faults.setDown(true);
    await h.accept(configMapWrite(h.key, "a", "1", { save: true }));
    await waitFor("retry scheduled", () => worker.snapshot().nextRetryAt !== undefined);
    const pushes = h.server.counts().push;
    for (let i = 0; i < 3; i++) expect((await worker.flush()).ok).toBe(false);
    expect(h.server.counts().push).toBe(pushes);
  });
});
