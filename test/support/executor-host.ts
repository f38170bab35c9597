/**
 * The queues around an executor host, for its own tests (sidecar/executor*.test.ts): the attempts
 * queue a branch worker sends on, the host's reporter, and a collector of every report, in order,
 * over real Redis under a prefix of their own.
 */
import { Queue, Worker } from "bullmq";
import { type Attempt, attemptsQueue, QUEUES, type Report } from "../../queue/contract.js";
import { queueReporter, type Reporter } from "../../sidecar/reporter.js";
import { type IsolatedRedis, isolatedRedis } from "../redis/isolated.js";
import { makeAttempt } from "./attempts.js";
import { until } from "./sidecar-world.js";

/** An attempt of FluxClaim apps/`claim` (Kustomization flux-system/`claim`) at commit c…c, sent now. */
export const hostAttempt = (token: string, claim = "web"): Attempt =>
  makeAttempt({
    token,
    claim: { kind: "FluxClaim", namespace: "apps", name: claim },
    applier: { kind: "flux", namespace: "flux-system", name: claim },
    branchKey: "git.example/org/repo@main",
    repository: "https://git.example/org/repo",
    commit: "c".repeat(40),
    targets: [{ uid: "u1", namespace: "apps", name: "t1", reason: "ForeignCommit" }],
    sentAt: new Date().toISOString(),
  });

export interface HostQueues {
  redis: IsolatedRedis;
  /** What the host reports through. */
  reporter: Reporter;
  /** The attempts queue of the Flux kind, as the branch worker sends on it. */
  sender: Queue;
  /** Every report collected so far, in the order it was queued. */
  reports: Report[];
  /** The reports of `token`. */
  reportsOf(token: string): Array<Report & { reason?: string }>;
  phases(token: string): string[];
  /**
   * Every report sent before this call is collected once it returns: a marker sent now is
   * collected after them (one queue, one collector, in order).
   */
  collectedSoFar(): Promise<void>;
  close(): Promise<void>;
}

export async function hostQueues(label: string): Promise<HostQueues> {
  const redis = await isolatedRedis(label);
  const connection = { url: redis.url, maxRetriesPerRequest: null };
  const reports: Report[] = [];
  const reporter = queueReporter({ redisUrl: redis.url, prefix: redis.prefix });
  const sender = new Queue(attemptsQueue("flux"), { connection, prefix: redis.prefix });
  const collector = new Worker(QUEUES.reports, async (job) => void reports.push(job.data as Report), {
    connection,
    prefix: redis.prefix,
  });
  const reportsOf = (token: string) =>
    reports.filter((r) => r.type === "phase" && r.token === token) as Array<Report & { reason?: string }>;
  let markers = 0;
  return {
    redis,
    reporter,
    sender,
    reports,
    reportsOf,
    phases: (token) => reportsOf(token).map((r) => (r as { phase: string }).phase),
    async collectedSoFar() {
      const a = hostAttempt(`marker-${++markers}`);
      await reporter.phase({
        token: a.token,
        claim: a.claim,
        branchKey: a.branchKey,
        phase: "Running",
        at: new Date().toISOString(),
        commit: a.commit,
      });
      await until(() => reportsOf(a.token).length > 0, "the reports sent so far to be collected");
    },
    async close() {
      await collector.close();
      await sender.close();
      await reporter.close();
      await redis.cleanup();
    },
  };
}
