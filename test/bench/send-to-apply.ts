/**
 * Helpers for the "attempt sent → apply started" figures of the Flux and Argo CD benchmarks: every
 * millisecond between the branch worker's send and the write that starts the apply (the Flux
 * resume, the Argo CD sync update) is revert window, since an edit accepted in it is not in the
 * commit being applied. The attempt goes through the real attempts queue (BullMQ on the test
 * Redis) to the sidecar's executor host, with the sidecar's own Redis checks (the tip, the edit
 * recheck) on the way, as `startSidecar` wires them.
 */
import { randomBytes } from "node:crypto";
import { queueSender } from "../../queue/apply/index.js";
import type { Attempt, ReportPhase } from "../../queue/contract.js";
import { silentLogger } from "../../queue/log.js";
import { connectRedis } from "../../queue/redis.js";
import { BranchLease } from "../../queue/worker/lease.js";
import { recordTip } from "../../queue/worker/tip-record.js";
import type { OperationExecutor } from "../../sidecar/applier-kind.js";
import { startExecutorHost } from "../../sidecar/executor.js";
import { Following } from "../../sidecar/following.js";
import type { Reporter } from "../../sidecar/reporter.js";
import { redisFreshnessCheck, redisTipCheck } from "../../sidecar/tip-check.js";
import { testRedisUrl } from "../redis/isolated.js";

export const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
};

/** Times of one attempt, in ms after its send. */
export interface Timeline {
  taken: number;
  requested: number;
  applyStarted: number;
  ended: number;
  last: ReportPhase;
}

/** The sidecar's side of one bench: its Redis checks, an executor host, and the worker's sender. */
export async function sidecarRig() {
  const url = testRedisUrl();
  const prefix = `bench-${randomBytes(4).toString("hex")}`;
  const redis = connectRedis(url);
  const checks = {
    tip: redisTipCheck(redis, prefix),
    freshness: redisFreshnessCheck(redis, prefix),
  };
  const sender = queueSender(url, prefix);
  const hosts: Array<ReturnType<typeof startExecutorHost>> = [];
  const leases = new Map<string, BranchLease>();
  let t0 = 0;
  const marks: Partial<Record<"taken" | "applyStarted", number>> = {};
  const phases: Array<{ phase: ReportPhase; at: number }> = [];
  let settle: (() => void) | undefined;
  const reporter: Reporter = {
    async send() {
      return "queued";
    },
    async phase(r) {
      phases.push({ phase: r.phase, at: performance.now() });
      if (["Succeeded", "Failed", "RequestFailed", "Rejected", "Dropped", "Stale"].includes(r.phase))
        settle?.();
      return "queued";
    },
    async applierWrite() {
      return "queued";
    },
    async close() {},
  };
  return {
    checks,
    /** Marks the write that starts the apply (call it from a wrapper around that write). */
    applyStarted() {
      marks.applyStarted ??= performance.now();
    },
    host(kind: "flux" | "argocd", executor: OperationExecutor) {
      const timed: OperationExecutor = {
        execute(attempt, report, signal) {
          marks.taken ??= performance.now();
          return executor.execute(attempt, report, signal);
        },
      };
      hosts.push(
        startExecutorHost({
          kind,
          executor: timed,
          reporter,
          following: new Following(),
          log: silentLogger(),
          redisUrl: url,
          prefix,
        }),
      );
    },
    /** Records `tip` as the branch's owner would (the executors' tip check reads it). */
    async record(branchKey: string, tip: string) {
      let lease = leases.get(branchKey);
      if (!lease) {
        lease = new BranchLease(redis, prefix, branchKey, "bench", 600_000);
        if (!(await lease.acquire())) throw new Error("lease is held");
        leases.set(branchKey, lease);
      }
      await recordTip(redis, prefix, branchKey, lease.token as string, tip);
    },
    /** Sends the attempt as the worker does and waits for its terminal report. */
    async run(attempt: Attempt): Promise<Timeline> {
      phases.length = 0;
      delete marks.taken;
      delete marks.applyStarted;
      const ended = new Promise<void>((r) => {
        settle = r;
      });
      t0 = performance.now();
      await sender.send(attempt);
      await ended;
      const at = (p: ReportPhase) => (phases.find((x) => x.phase === p)?.at ?? Number.NaN) - t0;
      const last = phases.at(-1) as { phase: ReportPhase; at: number };
      return {
        taken: (marks.taken ?? Number.NaN) - t0,
        requested: at("Requested"),
        applyStarted: (marks.applyStarted ?? Number.NaN) - t0,
        ended: last.at - t0,
        last: last.phase,
      };
    },
    async close() {
      for (const h of hosts) await h.stop();
      await sender.close();
      redis.disconnect();
    },
  };
}
