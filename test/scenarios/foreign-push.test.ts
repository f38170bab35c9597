/**
 * A foreign Git push and an API edit at the same moment: each applier applies once, a
 * ForeignCommit for a tip that holds both sides, and the cluster ends with both.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiEdit, clusterValue, foreignPush, gitValue, holds, tip, until } from "../playground/actors.js";
import { operationsOf, type Scene, startScene } from "./harness.js";

describe("a foreign push", () => {
  let s: Scene;
  beforeAll(async () => {
    s = await startScene();
  });
  afterAll(async () => s?.stop());

  it("is applied once by each applier, with the API edit made meanwhile", async () => {
    const [edit, pushed] = await Promise.all([
      apiEdit(s.a, "flux", "from-api"),
      foreignPush(s.a, "argocd", "from-git"),
    ]);
    expect(edit.status).toBe(200);
    for (const kind of ["flux", "argocd"] as const) {
      await until(
        async () => operationsOf(s, kind).some((o) => o.phases.includes("Succeeded")),
        `${kind} to apply the foreign commit`,
      );
    }
    const head = await tip(s.a);
    expect(await clusterValue(s.a, "flux")).toMatchObject({ greeting: "from-api" });
    expect((await clusterValue(s.a, "argocd")).greeting).toBe("from-git");
    expect(await gitValue(s.a, "flux")).toBe("from-api");
    expect(await gitValue(s.a, "argocd")).toBe("from-git");
    for (const kind of ["flux", "argocd"] as const) {
      // Applied once: one operation succeeded. An attempt overtaken by a newer tip before it
      // started anything (Stale, RequestFailed) may precede it; it applied nothing.
      const all = operationsOf(s, kind);
      const done = all.filter((o) => o.phases.includes("Succeeded"));
      expect(done.length, `${kind}: ${JSON.stringify(all.map((o) => [o.attempt.commit, o.phases]))}`).toBe(1);
      for (const o of all) if (o !== done[0]) expect(o.phases).not.toContain("Running");
      const op = done[0]!;
      expect(op.attempt.targets.map((t) => t.reason)).toContain("ForeignCommit");
      expect(await holds(s.a, op.attempt.commit, pushed)).toBe(true);
      expect(await holds(s.a, op.attempt.commit, edit.body.commit)).toBe(true);
      expect(op.attempt.commit).toBe(head);
      expect(op.phases.at(-1)).toBe("Succeeded");
    }
  });
});
