/**
 * An operation ends once: the reporter keeps its first terminal report in Redis, atomically with
 * the job, so any later end of that token, from this process or another one, is dropped.
 */
import { Queue } from "bullmq";
import { afterEach, describe, expect, it } from "vitest";
import { type PhaseReport, QUEUES, type ReportPhase } from "../queue/contract.js";
import { type IsolatedRedis, isolatedRedis } from "../test/redis/isolated.js";
import { END_MEMORY_MS, memoryReporter, queueReporter, type Reporter } from "./reporter.js";

const phase = (token: string, p: ReportPhase): Omit<PhaseReport, "type"> => ({
  token,
  claim: { kind: "ArgoCDClaim", namespace: "apps", name: "web" },
  branchKey: "git.example/org/repo@main",
  phase: p,
  at: new Date().toISOString(),
  commit: "c".repeat(40),
});

describe("reporter: an operation ends once", () => {
  let redis: IsolatedRedis | undefined;
  const open: Array<Reporter | Queue> = [];
  afterEach(async () => {
    for (const o of open.splice(0)) await o.close();
    await redis?.cleanup();
    redis = undefined;
  });

  async function queued(): Promise<Array<{ token: string; phase: string }>> {
    const q = new Queue(QUEUES.reports, { connection: { url: redis!.url }, prefix: redis!.prefix });
    open.push(q);
    // In the order queued: ids are the queue's counter (reports made in one millisecond share `at`).
    const jobs = await q.getJobs(["waiting"]);
    return jobs
      .sort((a, b) => Number(a.id) - Number(b.id))
      .map((j) => j.data as { token: string; phase: string })
      .map(({ token, phase }) => ({ token, phase }));
  }

  it("queue reporter: the first end of a token is queued; later ends, from any process, are dropped; other phases and tokens pass", async () => {
    redis = await isolatedRedis("reporter");
    const one = queueReporter({ redisUrl: redis.url, prefix: redis.prefix });
    const two = queueReporter({ redisUrl: redis.url, prefix: redis.prefix });
    open.push(one, two);
    expect(await one.phase(phase("a", "Running"))).toBe("queued");
    expect(await one.phase(phase("a", "Running"))).toBe("queued");
    expect(await one.phase(phase("a", "Succeeded"))).toBe("queued");
    expect(await two.phase(phase("a", "RequestFailed"))).toBe("alreadyEnded");
    expect(await one.phase(phase("a", "Succeeded"))).toBe("alreadyEnded");
    expect(await two.phase(phase("b", "Failed"))).toBe("queued");
    expect(await queued()).toEqual([
      { token: "a", phase: "Running" },
      { token: "a", phase: "Running" },
      { token: "a", phase: "Succeeded" },
      { token: "b", phase: "Failed" },
    ]);
    // The mark outlives the job, for as long as a dead process's job can be found stalled.
    const ttl = await redis.client.pttl(`${redis.prefix}:${QUEUES.reports}:de:end:a`);
    expect(ttl).toBeGreaterThan(END_MEMORY_MS - 60_000);
  });

  it("memory reporter: the same rule", async () => {
    const r = memoryReporter();
    expect(await r.phase(phase("a", "Stale"))).toBe("queued");
    expect(await r.phase(phase("a", "Succeeded"))).toBe("alreadyEnded");
    expect(await r.phase(phase("a", "Running"))).toBe("queued");
    expect(r.reports.map((x) => (x.type === "phase" ? x.phase : x.type))).toEqual(["Stale", "Running"]);
  });
});
