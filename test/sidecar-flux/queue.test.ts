/**
 * The Flux executor behind the shared attempt host, over real Redis: an Attempt job on
 * attempts-flux in, PhaseReports on the reports queue out, as the branch worker sees them.
 */
import { Queue } from "bullmq";
import { afterAll, beforeAll, expect, it } from "vitest";
import { attemptsQueue, QUEUES, type Report } from "../../queue/contract.js";
import { silentLogger } from "../../queue/log.js";
import { startExecutorHost } from "../../sidecar/executor.js";
import { queueReporter } from "../../sidecar/reporter.js";
import { isolatedRedis } from "../redis/isolated.js";
import { configMap, scene, startWorld, until, type World } from "./harness.js";

let world: World;
beforeAll(async () => {
  world = await startWorld();
});
afterAll(async () => {
  await world?.stop();
});

it("an attempt queued on attempts-flux is carried out and every phase reported on the reports queue", async () => {
  const redis = await isolatedRedis("flux");
  const s = await scene(world);
  await s.adopt();
  const reporter = queueReporter({ redisUrl: redis.url, prefix: redis.prefix });
  const host = startExecutorHost({
    kind: "flux",
    executor: s.kind.executor,
    reporter,
    following: s.following,
    log: silentLogger(),
    redisUrl: redis.url,
    prefix: redis.prefix,
  });
  const attempts = new Queue(attemptsQueue("flux"), { connection: { url: redis.url }, prefix: redis.prefix });
  const reports = new Queue(QUEUES.reports, { connection: { url: redis.url }, prefix: redis.prefix });
  try {
    const commit = await s.push({ "apps/cm.yaml": configMap("app-config", "queued") });
    const attempt = s.attempt(commit);
    await attempts.add("attempt", attempt);
    const phases = await until(async () => {
      const jobs = await reports.getJobs(["waiting", "active", "completed", "delayed"]);
      const mine = jobs
        .sort((a, b) => Number(a.id) - Number(b.id))
        .map((j) => j.data as Report)
        .filter(
          (r): r is Extract<Report, { type: "phase" }> => r.type === "phase" && r.token === attempt.token,
        );
      return mine.some((r) => r.phase === "Succeeded") && mine;
    }, "the Succeeded report");
    const ordered = phases.map((r) => r.phase);
    expect(ordered).toEqual(["Requested", "Running", "Settling", "Succeeded"]);
    expect(phases.every((r) => r.branchKey === attempt.branchKey && r.commit === commit)).toBe(true);
    expect(await s.configValue()).toBe("queued");
    expect((await s.readKs()).spec?.suspend).toBe(true);
  } finally {
    await host.stop();
    await reporter.close();
    await attempts.close();
    await reports.close();
    await redis.cleanup();
  }
});
