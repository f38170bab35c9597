/**
 * A sidecar killed (SIGKILL, a crash) while it carried out an attempt, before it recorded anything
 * on the claim: nothing was started, nothing on the claim lets a restart recover it, and the dead
 * process reported nothing. Found by the soak (seed 5051 with 8 actions: the Flux sidecar killed
 * while the GitRepository fetched): the worker waited for that attempt forever. The next process
 * finds the job stalled once its lock runs out and reports it RequestFailed, unless the claim
 * records it (then restart recovery follows it).
 */
import { Worker } from "bullmq";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { type Attempt, attemptsQueue } from "../queue/contract.js";
import { recoveredOperation } from "../test/support/attempts.js";
import { hostAttempt as attempt, type HostQueues, hostQueues } from "../test/support/executor-host.js";
import { untilWith } from "../test/support/wait.js";
import type { OperationExecutor } from "./applier-kind.js";
import {
  ATTEMPT_LOCK_MS,
  ATTEMPT_STALLED_CHECK_MS,
  type ExecutorHost,
  startExecutorHost,
} from "./executor.js";
import { Following } from "./following.js";
import { queueReporter } from "./reporter.js";

const until = untilWith({ timeoutMs: 15_000, everyMs: 20 });

describe("an attempt whose sidecar died", () => {
  let q: HostQueues | undefined;
  let host: ExecutorHost | undefined;
  /** Attempts the next process carried out: a stalled one must never run again (no retry). */
  const executedAgain: string[] = [];
  /** The next process's bookkeeping of followed and ended operations. */
  let following = new Following();
  /** What the next process logged. */
  const logLines: string[] = [];

  /**
   * No report beyond those collected: once the next process logged `line` (its last word on the
   * stalled attempt), everything it sent before is collected.
   */
  async function nothingMoreAfter(line: string) {
    await until(() => logLines.includes(line), `the next process to log "${line}"`);
    await q!.collectedSoFar();
  }

  afterEach(async () => {
    await host?.stop();
    host = undefined;
    await q?.close();
    q = undefined;
  });

  /**
   * Sends an attempt, lets a process take it and die holding it, then starts the next process;
   * both with short locks, or (`defaults`) with the lock and check a sidecar runs with.
   */
  async function diedHolding(
    token: string,
    recorded: (a: Attempt) => Promise<boolean>,
    defaults = false,
    recover?: OperationExecutor["recover"],
  ) {
    const lock = defaults ? ATTEMPT_LOCK_MS : 1_000;
    const check = defaults ? ATTEMPT_STALLED_CHECK_MS : 300;
    q = await hostQueues("stalled");
    const { redis } = q;
    const connection = { url: redis.url, maxRetriesPerRequest: null };
    executedAgain.length = 0;
    logLines.length = 0;
    let taken = false;
    const dying = new Worker(
      attemptsQueue("flux"),
      async () => {
        taken = true;
        await new Promise(() => {}); // dies before it records or reports anything
      },
      { connection, prefix: redis.prefix, lockDuration: lock, stalledInterval: check, maxStalledCount: 0 },
    );
    const job = await q.sender.add("attempt", attempt(token), { attempts: 1 });
    await until(() => taken, "the first process to take the attempt");
    await dying.close(true); // its lock is no longer renewed, as after a SIGKILL
    following = new Following();
    host = startExecutorHost({
      kind: "flux",
      executor: {
        execute: async (a) => {
          executedAgain.push(a.token);
        },
        ...(recover ? { recover } : {}),
      },
      reporter: q.reporter,
      following,
      log: pino({ level: "info" }, { write: (line: string) => void logLines.push(JSON.parse(line).msg) }),
      redisUrl: redis.url,
      prefix: redis.prefix,
      recorded,
      ...(defaults ? {} : { lockDurationMs: 1_000, stalledIntervalMs: 300 }),
    });
    return job;
  }

  const phases = (token: string) => q!.reportsOf(token);

  it("recorded nothing: reported RequestFailed (SidecarLost), once", async () => {
    const job = await diedHolding("t1", async () => false);
    await until(() => phases("t1").length > 0, "the lost attempt's report");
    // The stalled job ends failed, never run again by the next process.
    await until(async () => (await job.getState()) === "failed", "the stalled job to fail");
    expect(executedAgain).toEqual([]);
    expect(phases("t1")).toMatchObject([{ phase: "RequestFailed", reason: "SidecarLost", token: "t1" }]);
  });

  // Found by the soak (seed 8069 with 8 actions): with BullMQ's 30 s lock and check, the attempt
  // of a Flux sidecar killed just after it took it was reported 97 s later on a loaded machine,
  // and the branch waited all that time. With the sidecar's own settings it is within 15 s.
  it("with the sidecar's own lock and check, a dead process's attempt is reported within 15 s", async () => {
    const t0 = Date.now();
    await diedHolding("t3", async () => false, true);
    await untilWith({ timeoutMs: 20_000, everyMs: 50 })(
      () => phases("t3").length > 0,
      "the lost attempt's report",
    );
    expect(ATTEMPT_LOCK_MS + ATTEMPT_STALLED_CHECK_MS).toBeLessThanOrEqual(15_000);
    expect(Date.now() - t0).toBeLessThan(20_000);
    expect(phases("t3")).toMatchObject([{ phase: "RequestFailed", reason: "SidecarLost", token: "t3" }]);
  }, 30_000);

  it("recorded on its claim: left to restart recovery, nothing reported", async () => {
    let asked = false;
    await diedHolding("t2", async () => {
      asked = true;
      return true;
    });
    await until(() => asked, "the claim asked whether it records the attempt");
    await nothingMoreAfter("an attempt's process died after recording it; restart recovery follows it");
    expect(phases("t2")).toEqual([]);
  });

  // Found by the soak (seed 22014 with 8 actions): the Argo CD sidecar was killed after it recorded
  // an attempt and requested its sync. The next process recovered the operation from the claim and
  // reported it Succeeded; the worker then sent a newer attempt, whose record replaced it on the
  // claim. When the dead process's lock ran out, the stalled check found the claim recording
  // another token and reported the first operation RequestFailed (SidecarLost) too: two terminal
  // reports for one operation.
  it("recovered and ended here before it is found stalled: its one end is the only report", async () => {
    let claimRecords = "t4";
    const job = await diedHolding(
      "t4",
      async (a) => claimRecords === a.token,
      false,
      async (_op, report) => {
        await report("Succeeded");
      },
    );
    const started = host!.recover(recoveredOperation("t4", "c".repeat(40)));
    expect(started).toBe(true);
    await until(() => phases("t4").length > 0, "the recovered operation's end");
    claimRecords = "t5"; // the worker's next attempt is recorded on the claim
    await until(async () => (await job.getState()) === "failed", "the stalled job to fail");
    await nothingMoreAfter("a stalled attempt is carried out, followed or ended here; nothing to report");
    expect(executedAgain).toEqual([]);
    expect(phases("t4")).toMatchObject([{ phase: "Succeeded", token: "t4" }]);
    expect(phases("t4")).toHaveLength(1);
  });

  it("its end recorded by the dead process and reported again by the claim reconciler: not reported lost as well (soak seed 60068)", async () => {
    let claimRecords = "t6";
    const job = await diedHolding("t6", async (a) => claimRecords === a.token);
    // The claim reconciler of the next process found t6 ended on the claim and reported it again.
    following.reportedEnd("t6", "Succeeded");
    claimRecords = "t7"; // the worker's next attempt is recorded on the claim
    await until(async () => (await job.getState()) === "failed", "the stalled job to fail");
    await nothingMoreAfter("a stalled attempt is carried out, followed or ended here; nothing to report");
    expect(executedAgain).toEqual([]);
    expect(phases("t6")).toEqual([]);
  });

  // Found by the soak (seed 162072 with 8 actions): the Argo CD sidecar was killed twice, 2 s apart.
  // The second process recovered the first one's operation from the claim, reported it Succeeded
  // and was killed too, taking its memory of that end with it. The third found the first one's job
  // stalled, the claim recording a newer operation by then, and reported the first RequestFailed
  // (SidecarLost): two ends for one operation. Redis keeps the first end.
  it("ended by a second process that died in turn: the third, finding the first one's job stalled, ends it no second time", async () => {
    let claimRecords = "t8";
    const job = await diedHolding("t8", async (a) => claimRecords === a.token);
    // The second process's end: its own reporter, its own memory, gone with it.
    const second = queueReporter({ redisUrl: q!.redis.url, prefix: q!.redis.prefix });
    const sent = await second.phase({
      token: "t8",
      claim: attempt("t8").claim,
      branchKey: attempt("t8").branchKey,
      phase: "Succeeded",
      at: new Date().toISOString(),
      commit: attempt("t8").commit,
    });
    await second.close();
    expect(sent).toBe("queued");
    claimRecords = "t9"; // the worker's next attempt is recorded on the claim
    await until(async () => (await job.getState()) === "failed", "the stalled job to fail");
    // Redis keeps the first end: the third process's report of it as lost is dropped there.
    await nothingMoreAfter("this operation's end was reported before; dropped");
    expect(executedAgain).toEqual([]);
    expect(phases("t8")).toMatchObject([{ phase: "Succeeded", token: "t8" }]);
    expect(phases("t8")).toHaveLength(1);
  });
});
