/**
 * A foreign Git push and an API edit at the same moment: each applier applies once, a
 * ForeignCommit for a tip that holds both sides, and the cluster ends with both.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TERMINAL_PHASES } from "../../queue/contract.js";
import { apiEdit, clusterValue, foreignPush, gitValue, holds, tip, until } from "../playground/actors.js";
import { operationsOf, type Scene, startScene } from "./harness.js";

/** The terminal report of an attempt, with when it was queued. */
function endOf(s: Scene, token: string) {
  for (const e of s.progress.events) {
    if (e.type === "phase" && e.report.token === token && TERMINAL_PHASES.includes(e.report.phase)) {
      return { phase: e.report.phase, reason: e.report.reason, at: e.at };
    }
  }
  return undefined;
}

const sentAt = (s: Scene, token: string) =>
  s.progress.events.find((e) => e.type === "attempt" && e.attempt.token === token)?.at.getTime() ?? 0;

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
      // Applied once: one operation succeeded.
      const all = operationsOf(s, kind);
      const trail = JSON.stringify(all.map((o) => [o.attempt.commit, o.phases]));
      const done = all.filter((o) => o.phases.includes("Succeeded"));
      expect(done.length, `${kind}: ${trail}`).toBe(1);
      const op = done[0]!;
      // Never two out for one applier: every attempt before it ended, Stale or RequestFailed with
      // a reason and before anything was resumed or synced, before the next one was sent.
      const before = all.slice(0, all.indexOf(op));
      for (const [i, o] of before.entries()) {
        const end = endOf(s, o.attempt.token);
        expect(end, `${kind}: ${trail}`).toMatchObject({ reason: expect.any(String) });
        expect(["Stale", "RequestFailed"], `${kind}: ${trail}`).toContain(end?.phase);
        expect(o.phases).not.toContain("Running");
        const next = all[i + 1]!.attempt.token;
        expect(end?.at.getTime(), `${kind}: ${trail}`).toBeLessThanOrEqual(sentAt(s, next));
      }
      expect(op.attempt.targets.map((t) => t.reason)).toContain("ForeignCommit");
      expect(await holds(s.a, op.attempt.commit, pushed)).toBe(true);
      expect(await holds(s.a, op.attempt.commit, edit.body.commit)).toBe(true);
      expect(op.attempt.commit).toBe(head);
      expect(op.phases.at(-1)).toBe("Succeeded");
    }
  });
});
