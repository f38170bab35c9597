/**
 * The playground's start: each applier's first apply is its first attempt, and they land together.
 * (The worker once took the branch before the claims held their appliers: Flux's converge failed
 * and was retried 2 s later, Argo CD's was Rejected and waited 15 s, ~12 s behind the others.)
 */
import { Queue } from "bullmq";
import { describe, expect, it } from "vitest";
import { attemptsQueue } from "../../queue/contract.js";
import { bullConnection } from "../../queue/redis.js";
import { settled } from "../playground/actors.js";
import { startScene } from "./harness.js";

describe("the playground's start", () => {
  it("applies with each applier's first attempt, all three within seconds of each other", async () => {
    const s = await startScene();
    try {
      await settled(s.a, 30_000, ["flux", "argocd", "webhook"]);
      const firstEnds: number[] = [];
      for (const kind of ["flux", "argocd", "webhook"] as const) {
        const q = new Queue(attemptsQueue(kind), {
          connection: bullConnection(s.a.redis.url),
          prefix: s.a.prefix,
        });
        try {
          const failed = await q.getFailed();
          expect(
            failed.map((j) => `${j.name}: ${j.failedReason}`),
            `${kind}: no attempt at start failed`,
          ).toEqual([]);
          const done = await q.getCompleted();
          expect(done.length, `${kind}: one converge`).toBe(1);
          firstEnds.push(done[0]?.finishedOn ?? 0);
        } finally {
          await q.close();
        }
      }
      expect(Math.max(...firstEnds) - Math.min(...firstEnds)).toBeLessThan(5_000);
    } finally {
      await s.stop();
    }
  }, 120_000);
});
