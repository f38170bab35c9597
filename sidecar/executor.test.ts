import { afterEach, describe, expect, it } from "vitest";
import type { Attempt } from "../queue/contract.js";
import { silentLogger } from "../queue/log.js";
import { recoveredOperation } from "../test/support/attempts.js";
import { hostAttempt as attempt, type HostQueues, hostQueues } from "../test/support/executor-host.js";
import { untilWith } from "../test/support/wait.js";
import type { OperationExecutor } from "./applier-kind.js";
import { type ExecutorHost, startExecutorHost } from "./executor.js";
import { Following } from "./following.js";

const until = untilWith({ timeoutMs: 5000, everyMs: 10 });

describe("executor host", () => {
  let q: HostQueues | undefined;
  let host: ExecutorHost | undefined;

  async function setup(
    executor: OperationExecutor,
    following = new Following(),
    recorded?: (a: Attempt) => Promise<boolean>,
  ) {
    q = await hostQueues("exec");
    host = startExecutorHost({
      kind: "flux",
      executor,
      reporter: q.reporter,
      following,
      log: silentLogger(),
      redisUrl: q.redis.url,
      prefix: q.redis.prefix,
      ...(recorded ? { recorded } : {}),
    });
    return { following };
  }

  afterEach(async () => {
    await host?.stop();
    host = undefined;
    await q?.close();
    q = undefined;
  });

  const phases = (token: string) => q!.phases(token);
  const collectedSoFar = () => q!.collectedSoFar();

  it("reports every phase of an operation with claim, branch key, token and commit", async () => {
    await setup({
      async execute(_a, report) {
        await report("Requested");
        await report("Running");
        await report("Settling");
        await report("Succeeded", { revisionMismatch: false });
      },
    });
    await q!.sender.add("attempt", attempt("t1"), { attempts: 1 });
    await until(() => phases("t1").length === 4, "four reports");
    expect(phases("t1")).toEqual(["Requested", "Running", "Settling", "Succeeded"]);
    expect(q!.reports[0]).toMatchObject({
      type: "phase",
      claim: { kind: "FluxClaim", namespace: "apps", name: "web" },
      branchKey: "git.example/org/repo@main",
      commit: "c".repeat(40),
    });
  });

  it("a thrown error becomes one RequestFailed report and is not retried", async () => {
    let calls = 0;
    await setup({
      async execute() {
        calls++;
        throw new Error("GitRepository not found");
      },
    });
    const job = await q!.sender.add("attempt", attempt("t2"), { attempts: 3 });
    await until(() => phases("t2").length === 1, "a report");
    expect(q!.reports[0]).toMatchObject({ phase: "RequestFailed", message: "GitRepository not found" });
    // A retry would put the job back in line: it ends for good after one call.
    await until(async () => ["completed", "failed"].includes(await job.getState()), "the job to end");
    expect(calls).toBe(1);
  });

  it("an executor that ends without an outcome is reported RequestFailed; later phases are dropped", async () => {
    await setup({
      async execute(_a, report) {
        await report("Requested");
      },
    });
    await q!.sender.add("attempt", attempt("t3"), { attempts: 1 });
    await until(() => phases("t3").length === 2, "two reports");
    expect(phases("t3")).toEqual(["Requested", "RequestFailed"]);
  });

  it("follows at most one operation per claim and registers it as Following", async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const { following } = await setup({
      async execute(a, report) {
        await report("Running");
        if (a.token === "first") await gate;
        await report("Succeeded");
      },
    });
    await q!.sender.add("attempt", attempt("first"), { attempts: 1 });
    await until(() => following.isFollowed("first"), "first followed");
    expect(following.forClaim("apps/web")).toBe("first");
    await q!.sender.add("attempt", attempt("second"), { attempts: 1 });
    await until(() => phases("second").length === 1, "second refused");
    expect(q!.reports.find((r) => r.token === "second")).toMatchObject({
      phase: "RequestFailed",
      reason: "OperationInFlight",
    });
    await q!.sender.add("attempt", attempt("other", "api"), { attempts: 1 });
    await until(() => phases("other").includes("Succeeded"), "another claim runs alongside");
    release();
    await until(() => phases("first").includes("Succeeded"), "first done");
    await until(() => !following.isFollowed("first"), "first unfollowed");
  });

  it("a graceful stop aborts running operations, reports nothing for them, then calls shutdown", async () => {
    const order: string[] = [];
    await setup({
      async execute(_a, report, signal) {
        await report("Running");
        // The stop may come while the report is still being shown on the job: the test sees
        // Running once it is sent, before this await returns.
        await new Promise<void>((r) =>
          signal.aborted ? r() : signal.addEventListener("abort", () => r(), { once: true }),
        );
        order.push("aborted");
      },
      async shutdown() {
        order.push("shutdown");
      },
    });
    await q!.sender.add("attempt", attempt("t5"), { attempts: 1 });
    await until(() => phases("t5").length === 1, "running");
    await host!.stop();
    host = undefined;
    expect(order).toEqual(["aborted", "shutdown"]);
    await collectedSoFar();
    expect(phases("t5")).toEqual(["Running"]);
  });

  // Seed 82057: the record's write failed after its conflict retries just as a graceful stop
  // aborted the attempt. Nothing was on the claim for recovery and the stop completed the job, so
  // no stalled check would find it: the attempt never ended.
  describe("an attempt stopped before its record landed", () => {
    /** An executor whose record write fails as the stop comes; `recordedNow` says what the claim holds. */
    async function stoppedWhileRecording(token: string, recordedNow: () => Promise<boolean>, throws = true) {
      const asked: string[] = [];
      let entered!: () => void;
      const inExecute = new Promise<void>((r) => (entered = r));
      await setup(
        {
          async execute(_a, _report, signal) {
            entered();
            await new Promise<void>((r) => signal.addEventListener("abort", () => r()));
            if (throws) throw new Error("the claim's status is still conflicting after 5 tries");
          },
        },
        new Following(),
        async (a) => {
          asked.push(a.token);
          return recordedNow();
        },
      );
      await q!.sender.add("attempt", attempt(token), { attempts: 1 });
      await inExecute;
      await host!.stop();
      host = undefined;
      return asked;
    }
    /** The report is sent before the stop returns; the collector reads it from the queue after. */
    const reported = (token: string) => until(() => phases(token).length > 0, `${token}'s report collected`);

    it("is reported RequestFailed (SidecarStopping) when the claim does not record it", async () => {
      const asked = await stoppedWhileRecording("s1", async () => false);
      expect(asked).toEqual(["s1"]);
      await reported("s1");
      expect(phases("s1")).toEqual(["RequestFailed"]);
      expect(q!.reports.find((r) => r.token === "s1")).toMatchObject({ reason: "SidecarStopping" });
    });

    it("also when the executor returned on the abort without an end", async () => {
      await stoppedWhileRecording("s2", async () => false, false);
      await reported("s2");
      expect(phases("s2")).toEqual(["RequestFailed"]);
    });

    it("is left for restart recovery when the claim records it", async () => {
      const asked = await stoppedWhileRecording("s3", async () => true);
      expect(asked).toEqual(["s3"]);
      await collectedSoFar();
      expect(phases("s3")).toEqual([]);
    });

    it("is left for restart recovery when the claim cannot be read at all", async () => {
      let reads = 0;
      await stoppedWhileRecording("s4", async () => {
        reads++;
        throw new Error("500 Internal Server Error");
      });
      expect(reads).toBe(6);
      await collectedSoFar();
      expect(phases("s4")).toEqual([]);
    });

    it("a read that fails and then answers decides on the answer", async () => {
      let reads = 0;
      await stoppedWhileRecording("s5", async () => {
        if (++reads < 3) throw new Error("500 Internal Server Error");
        return false;
      });
      expect(reads).toBe(3);
      await reported("s5");
      expect(phases("s5")).toEqual(["RequestFailed"]);
    });
  });

  it("recovers a recorded operation through executor.recover, reporting under its token", async () => {
    const { following } = await setup({
      async execute() {},
      async recover(op, report) {
        await report("Settling");
        await report("Failed", { reason: "NotResumed" });
        expect(op.operation.token).toBe("rec");
      },
    });
    const started = host!.recover(recoveredOperation("rec", "d".repeat(40)));
    expect(started).toBe(true);
    await until(() => phases("rec").length === 2, "recovered reports");
    expect(q!.reports.find((r) => r.token === "rec")).toMatchObject({
      commit: "d".repeat(40),
      phase: "Settling",
    });
    await until(() => !following.isFollowed("rec"), "released");
  });

  describe("the attempt's job, as the queue dashboard shows it", () => {
    const ended = (job: { getState(): Promise<string> }) =>
      until(async () => ["completed", "failed"].includes(await job.getState()), "the job to end");

    it("an operation that succeeded completes its job with the outcome; each phase is its progress and a log line", async () => {
      await setup({
        async execute(_a, report) {
          await report("Requested");
          await report("Running");
          await report("Succeeded");
        },
      });
      const job = await q!.sender.add("attempt", attempt("j1"), { attempts: 1 });
      await ended(job);
      const done = await q!.sender.getJob(job.id as string);
      expect(await done?.getState()).toBe("completed");
      expect(done?.returnvalue).toMatchObject({ phase: "Succeeded", commit: "c".repeat(40) });
      expect(done?.progress).toMatchObject({ phase: "Succeeded" });
      const { logs } = await q!.sender.getJobLogs(job.id as string);
      expect(logs.map((l) => l.split(" ")[1])).toEqual(["Requested", "Running", "Succeeded"]);
    });

    it("an operation that ended Failed fails its job with the reason and message, after its report; the queue never runs it again", async () => {
      let calls = 0;
      await setup({
        async execute(_a, report) {
          calls++;
          await report("Running");
          await report("Failed", { reason: "HealthCheckFailed", message: "deployment web not ready" });
        },
      });
      const job = await q!.sender.add("attempt", attempt("j2"), { attempts: 3 });
      await ended(job);
      const done = await q!.sender.getJob(job.id as string);
      expect(await done?.getState()).toBe("failed");
      expect(done?.failedReason).toBe("Failed: HealthCheckFailed: deployment web not ready");
      expect(phases("j2")).toEqual(["Running", "Failed"]);
      expect(calls).toBe(1);
    });

    it("an operation past its deadline (Unresolved) shows stuck while it is followed", async () => {
      let release = () => {};
      await setup({
        async execute(_a, report) {
          await report("Running");
          await report("Unresolved", { reason: "OperationTimeout", message: "no end observed in 10m" });
          await new Promise<void>((r) => {
            release = r;
          });
          await report("Succeeded");
        },
      });
      const job = await q!.sender.add("attempt", attempt("j3"), { attempts: 1 });
      await until(
        async () => (await q!.sender.getJob(job.id as string))?.progress?.toString() !== "0",
        "progress",
      );
      await until(
        async () =>
          ((await q!.sender.getJob(job.id as string))?.progress as { stuck?: boolean } | undefined)?.stuck ===
          true,
        "stuck",
      );
      expect(await job.getState()).toBe("active");
      const { logs } = await q!.sender.getJobLogs(job.id as string);
      expect(logs.at(-1)).toMatch(
        / STUCK Unresolved — OperationTimeout: no end observed in 10m \(past its deadline/,
      );
      release();
      await ended(job);
      expect(await job.getState()).toBe("completed");
    });

    it("a job run again by hand (a dashboard's retry, of a failed or a completed one) is refused and reports nothing", async () => {
      let calls = 0;
      await setup({
        async execute(a, report) {
          calls++;
          await report(a.token === "j4" ? "Failed" : "Succeeded", { message: "boom" });
        },
      });
      const failed = await q!.sender.add("attempt", attempt("j4"), { attempts: 1 });
      const completed = await q!.sender.add("attempt", attempt("j5", "api"), { attempts: 1 });
      await ended(failed);
      await ended(completed);
      expect(calls).toBe(2);
      await (await q!.sender.getJob(failed.id as string))?.retry("failed");
      await (await q!.sender.getJob(completed.id as string))?.retry("completed");
      for (const id of [failed.id, completed.id])
        await until(
          async () => (await q!.sender.getJob(id as string))?.failedReason?.includes("ran before") === true,
          "refused",
        );
      expect(calls).toBe(2);
      expect(phases("j4")).toEqual(["Failed"]);
      expect(phases("j5")).toEqual(["Succeeded"]);
    });
  });
});
