/**
 * A watched write of the applier's own managers waits in the branch worker for the decision
 * core's judgement: judged not mirrored it leaves the inbox without a commit, judged mirrored it
 * is published like an edit. Without a judge it is an edit at once.
 */
import { afterEach, describe, expect, it } from "vitest";
import { configMapWrite, fileOf, type Harness, harness, waitFor } from "../../test/worker/harness.js";
import type { AcceptedWrite } from "../contract.js";
import type { BranchWorker } from "./branch-worker.js";

const applierAuthored = {
  manager: "kustomize-controller",
  writtenAt: "2026-03-01T10:00:00Z",
  resourceVersion: "7",
};

describe("branch worker: watched applier writes", () => {
  let h: Harness;
  afterEach(async () => {
    await h.close();
  });

  async function judgedWorker() {
    const asked: AcceptedWrite[] = [];
    const worker: BranchWorker = await h.newWorker({
      hooks: { onWatchedApplierWrite: (w) => void asked.push(w) },
    });
    return { asked, worker };
  }

  it("is held until judged; not mirrored it leaves the inbox with no commit", async () => {
    h = await harness(undefined, { idleMs: 20, maxMs: 100 });
    const { asked, worker } = await judgedWorker();
    const echo = { ...configMapWrite(h.key, "a", "1"), applierAuthored };
    await h.accept(echo);
    await waitFor("asked to judge", () => asked.length === 1);
    expect(worker.judgingCount).toBe(1);
    expect(worker.snapshot().openWindows).toBe(0);
    worker.judged(echo.id, false);
    await waitFor("inbox emptied", async () => (await h.inboxLength()) === 0);
    expect(worker.judgingCount).toBe(0);
    expect(await h.log()).toEqual(["initial content"]);
  });

  it("judged mirrored (late, undo) it is published as an edit", async () => {
    h = await harness(undefined, { idleMs: 20, maxMs: 100 });
    const { asked, worker } = await judgedWorker();
    const late = { ...configMapWrite(h.key, "a", "2"), applierAuthored };
    await h.accept(late);
    await waitFor("asked to judge", () => asked.length === 1);
    worker.judged(late.id, true);
    await waitFor("published", () => h.published(late.id));
    expect(await h.file(fileOf("a"))).toContain('value: "2"');
  });

  it("without a judge it is an edit at once", async () => {
    h = await harness(undefined, { idleMs: 20, maxMs: 100 });
    await h.newWorker();
    const w = { ...configMapWrite(h.key, "a", "3"), applierAuthored };
    await h.accept(w);
    await waitFor("published", () => h.published(w.id));
  });
});
