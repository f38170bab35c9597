/**
 * The Flux executor behind the shared attempt host, over real Redis: an Attempt job on
 * attempts-flux in, PhaseReports on the reports queue out, as the branch worker sees them.
 */
import { expect, it } from "vitest";
import { fluxSpecField } from "../../queue/kube/index.js";
import { startExecutorHost } from "../../sidecar/executor.js";
import { queueReporter } from "../../sidecar/reporter.js";
import { fileWorld } from "../support/file-world.js";
import { adopted, startWorld } from "./harness.js";

const world = fileWorld(() => startWorld());

it("an attempt queued on attempts-flux is carried out and every phase reported on the reports queue", async () => {
  const s = await adopted(world);
  const { url, prefix } = world.redis;
  const reporter = queueReporter({ redisUrl: url, prefix });
  const host = startExecutorHost({
    kind: "flux",
    executor: s.kind.executor,
    reporter,
    following: s.following,
    log: world.log,
    redisUrl: url,
    prefix,
  });
  try {
    const commit = await s.pushConfig("queued");
    const attempt = await world.queues.send(s.attempt(commit));
    await world.queues.reported(attempt.token, "Succeeded");
    const reports = await world.queues.reports(attempt.token);
    expect(reports.map((r) => r.phase)).toEqual(["Requested", "Running", "Settling", "Succeeded"]);
    expect(reports.every((r) => r.branchKey === attempt.branchKey && r.commit === commit)).toBe(true);
    expect(await s.configValue()).toBe("queued");
    expect(fluxSpecField(await s.readKs(), "suspend")).toBe(true);
  } finally {
    await host.stop();
    await reporter.close();
  }
});
