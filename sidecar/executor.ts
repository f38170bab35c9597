/**
 * Takes apply attempts for one applier kind from its queue and hands each to the kind's
 * OperationExecutor, reporting every phase to the branch worker. It never retries: BullMQ runs
 * each job once (a stalled job is not run again), a thrown error is reported as RequestFailed,
 * and every retry is the branch worker's decision. One operation per claim at a time.
 */
import { randomUUID } from "node:crypto";
import { Job, UnrecoverableError, Worker } from "bullmq";
import type { Redis } from "ioredis";
import {
  type AttemptProgress,
  attemptJobEnd,
  attemptLogLine,
  attemptProgress,
} from "../queue/attempt-job.js";
import { backoffMs } from "../queue/backoff.js";
import {
  type ApplierKind,
  Attempt,
  attemptsQueue,
  type ClaimRef,
  type ReportPhase,
  type SupersededNotice,
  TERMINAL_PHASES,
} from "../queue/contract.js";
import { StatusReason } from "../queue/crds/reasons.js";
import { errorMessage } from "../queue/errors.js";
import { ATTEMPT_TAKEN_TTL_SECONDS, attemptTakenKey } from "../queue/keys.js";
import { applierField, claimField, type Logger } from "../queue/log.js";
import { bullConnection, CONSUMER_CLOSE_MS, closedWithin } from "../queue/redis.js";
import type { OperationExecutor, RecoveredOperation, ReportExtra, ReportFn } from "./applier-kind.js";
import { type Following, RecentTokens } from "./following.js";
import type { OperationMetrics } from "./metrics.js";
import type { Reporter } from "./reporter.js";

export interface ExecutorHostOptions {
  kind: ApplierKind;
  executor: OperationExecutor;
  reporter: Reporter;
  following: Following;
  log: Logger;
  redisUrl: string;
  prefix: string;
  /** Attempts carried out at once (for different claims); default 16. */
  concurrency?: number;
  now?: () => Date;
  /** How long a graceful stop waits for running operations to give back (default 30 s). */
  stopTimeoutMs?: number;
  /** Told of every attempt taken and every phase reported. */
  metrics?: OperationMetrics;
  /**
   * Whether the attempt's operation is recorded on its claim (restart recovery then follows it).
   * Asked for an attempt whose process died while it carried it out; without it such an attempt
   * is only logged.
   */
  recorded?: (attempt: Attempt) => Promise<boolean>;
  /**
   * BullMQ's lock on a job taken and its stalled-job check (defaults ATTEMPT_LOCK_MS and
   * ATTEMPT_STALLED_CHECK_MS; tests shorten them).
   */
  lockDurationMs?: number;
  stalledIntervalMs?: number;
}

/**
 * How long a taken attempt's lock lasts unrenewed (BullMQ renews it at half this). A sidecar
 * killed before it recorded an attempt on the claim leaves the job locked this long; the next
 * process reports it RequestFailed within this plus one stalled check, and the worker decides
 * anew. BullMQ's 30 s default made that up to a minute (more under load) in which the branch
 * waited for an attempt nobody carried out.
 */
export const ATTEMPT_LOCK_MS = 10_000;
/** How often the sidecar looks for taken attempts whose lock lapsed. */
export const ATTEMPT_STALLED_CHECK_MS = 5_000;

export interface ExecutorHost {
  /** Follows an operation recorded on a claim that nobody here follows; false when it cannot. */
  recover(op: RecoveredOperation): boolean;
  /** Tokens of operations carried out or followed now. */
  running(): string[];
  /** A notice that an operation is superseded: handed to the executor when this process runs it. */
  supersede(notice: SupersededNotice): void;
  /** Graceful stop: no new attempts, running ones see their signal abort, then executor.shutdown(). */
  stop(): Promise<void>;
}

/** Calls `fn` up to `tries` times, waiting 200 ms, 400 ms, 800 ms … between; throws the last failure. */
async function retried<T>(fn: () => Promise<T>, tries: number): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (attempt >= tries) throw err;
      await new Promise((res) => setTimeout(res, backoffMs({ initialMs: 200, maxMs: Infinity }, attempt)));
    }
  }
}

/**
 * Whether an attempt stopped on its way is recorded on its claim, read up to six times over ~6 s
 * when the read fails. When it cannot be read at all it counts as recorded: a report of "nothing
 * started" must never be sent for an operation that may run, and the record, if any, is there
 * for restart recovery.
 */
async function isRecorded(recordedOnClaim: () => Promise<boolean>, log: Logger): Promise<boolean> {
  try {
    return await retried(recordedOnClaim, 6);
  } catch (err) {
    log.error({ err: errorMessage(err) }, "cannot read whether the stopped operation was recorded");
    return true;
  }
}

export const claimKeyOf = (c: { namespace: string; name: string }) => `${c.namespace}/${c.name}`;

interface Running {
  token: string;
  claim: string;
  abort: AbortController;
  done: Promise<void>;
  state: { terminal: boolean; shown: AttemptProgress | undefined };
}

export function startExecutorHost(o: ExecutorHostOptions): ExecutorHost {
  const now = o.now ?? (() => new Date());
  const running = new Map<string, Running>();
  let stopping = false;
  /**
   * Tokens whose terminal report this process sent (the last 4096), whatever sent it: the
   * attempt's run, a recovery, a refusal. A stalled job is never reported again for one of them.
   */
  const endsReported = new RecentTokens();

  const busyClaim = (claim: string) => [...running.values()].find((r) => r.claim === claim);

  /**
   * The report function of one operation; remembers whether a terminal phase was sent. With the
   * attempt's job, each phase also shows on it (progress and a log line: queue/attempt-job.ts),
   * after its report is sent; a failure to show it changes nothing.
   */
  function reporterFor(
    token: string,
    claim: ClaimRef,
    branchKey: string,
    commit: string,
    log: Logger,
    job?: Job,
  ) {
    const state = {
      terminal: false,
      last: undefined as ReportPhase | undefined,
      shown: undefined as AttemptProgress | undefined,
    };
    const report: ReportFn = async (phase: ReportPhase, extra: ReportExtra = {}) => {
      if (state.terminal) {
        log.warn({ phase }, "phase reported after the operation ended; dropped");
        return;
      }
      state.last = phase;
      if (TERMINAL_PHASES.includes(phase)) {
        state.terminal = true;
        endsReported.add(token);
      }
      // An operation of no branch (an external resume while no GitTarget is eligible) is followed
      // to its end, and reported to nobody.
      if (!branchKey) return;
      o.metrics?.phase(o.kind, token, phase);
      log.info({ phase, reason: extra.reason }, "operation phase");
      const r = {
        token,
        claim,
        branchKey,
        phase,
        at: now().toISOString(),
        commit: extra.commit ?? commit,
        ...(extra.reason ? { reason: extra.reason } : {}),
        ...(extra.message ? { message: extra.message } : {}),
        ...(extra.revisionMismatch !== undefined ? { revisionMismatch: extra.revisionMismatch } : {}),
        ...(extra.retry ? { retry: extra.retry } : {}),
      };
      try {
        if ((await retried(() => o.reporter.phase(r), 5)) === "alreadyEnded")
          log.info({ phase }, "this operation's end was reported before; dropped");
      } catch (err) {
        log.error({ err: errorMessage(err), phase }, "could not send a report");
      }
      const shown = attemptProgress(phase, r.at, r.commit, extra);
      state.shown = shown;
      if (job)
        await Promise.all([job.updateProgress({ ...shown }), job.log(attemptLogLine(shown))]).catch((err) =>
          log.debug({ err: errorMessage(err) }, "could not show the phase on the attempt's job"),
        );
    };
    return { report, state };
  }

  /** Runs one operation with Following registered; turns a throw into RequestFailed. */
  function run(
    token: string,
    claim: ClaimRef,
    branchKey: string,
    commit: string,
    body: (report: ReportFn, signal: AbortSignal) => Promise<void>,
    /** For a branch worker's attempt: whether its operation is recorded on the claim. */
    recordedOnClaim?: () => Promise<boolean>,
    /** For a branch worker's attempt: its job, which shows each phase. */
    job?: Job,
  ): Running {
    const key = claimKeyOf(claim);
    const log = o.log.child({ claim: claimField(claim), token, commit, branch: branchKey });
    const { report, state } = reporterFor(token, claim, branchKey, commit, log, job);
    const abort = new AbortController();
    const unfollow = o.following.follow(token, key);
    let reportedItsEnd = false;
    // Stopped without an end: restart recovery follows what the claim records. An attempt whose
    // record never landed (its write failed as the stop came, seed 82057) or was taken back has
    // nothing to follow, and its job ends with this graceful stop, so no stalled check finds it
    // either: it is reported here, or the worker would wait for it forever.
    const leftOnStop = async (err?: string) => {
      if (!recordedOnClaim || (await isRecorded(recordedOnClaim, log))) {
        log.info({ err }, "operation left for restart recovery on stop");
        return;
      }
      log.info({ err }, "stopped before the operation was recorded; nothing was started");
      await report("RequestFailed", {
        reason: StatusReason.SidecarStopping,
        message: "the sidecar stopped before it recorded the operation; nothing was started",
      });
      reportedItsEnd = state.terminal;
    };
    const done = (async () => {
      try {
        await body(report, abort.signal);
        reportedItsEnd = state.terminal;
        if (!state.terminal && !abort.signal.aborted) {
          await report("RequestFailed", { message: "the executor ended without an outcome" });
        } else if (!state.terminal) {
          await leftOnStop();
        }
      } catch (err) {
        if (abort.signal.aborted && !state.terminal) {
          await leftOnStop(errorMessage(err));
        } else if (!state.terminal) {
          log.warn({ err: errorMessage(err) }, "operation failed");
          await report("RequestFailed", { message: errorMessage(err) });
        } else {
          reportedItsEnd = true;
          log.warn({ err: errorMessage(err) }, "error after the operation ended");
        }
      } finally {
        // Remembered as ended only when the executor itself reported its end (and so wrote it on
        // the claim): after a throw the claim may still show the operation resumed, and recovery
        // is what suspends and completes it.
        unfollow({ ended: reportedItsEnd, ...(state.last ? { phase: state.last } : {}) });
        o.metrics?.forget(o.kind, token);
        running.delete(token);
      }
    })();
    const r = { token, claim: key, abort, done, state };
    running.set(token, r);
    return r;
  }

  /**
   * Ends an attempt's job as its operation ended here: failed (with the phase, reason and message)
   * when it ended Failed, RequestFailed or Rejected, else completed with the outcome. Its report
   * is sent already: the job's state is only what the dashboard shows.
   */
  function endJob(state: { terminal: boolean; shown: AttemptProgress | undefined }) {
    const end = attemptJobEnd(state.shown, state.terminal);
    if ("failed" in end) throw new UnrecoverableError(end.failed);
    return end.completed;
  }

  async function process(job: Job): Promise<unknown> {
    const parsed = Attempt.safeParse(job.data);
    if (!parsed.success) {
      o.log.error({ job: job.id, err: parsed.error.issues[0]?.message }, "invalid attempt; ignored");
      throw new UnrecoverableError(`invalid attempt: ${parsed.error.issues[0]?.message}`);
    }
    const attempt = parsed.data;
    if (running.has(attempt.token)) return; // a duplicate delivery of one we carry out
    // An attempt runs once. A job run again (retried by hand) carried out its attempt before, and
    // reported its end: it is refused and reports nothing; a retry is the branch worker's to send.
    const redis = (await worker.backend.client) as unknown as Redis;
    const takenKey = attemptTakenKey(o.prefix, attempt.token);
    // The mark names this take: a mark whose answer was lost with the connection is sent again when
    // ioredis reconnects, and finds this take's own mark, which is no earlier run (seed 49061).
    const take = `${job.id ?? attempt.token}:${randomUUID()}`;
    const first = await redis.set(takenKey, take, "EX", ATTEMPT_TAKEN_TTL_SECONDS, "NX");
    if (first === null && (await redis.get(takenKey)) !== take) {
      o.log.warn({ token: attempt.token, branch: attempt.branchKey }, "an attempt's job ran again; refused");
      throw new UnrecoverableError(
        "this attempt ran before: an attempt runs once, and every retry is the branch worker's decision (a new attempt)",
      );
    }
    o.metrics?.attempt(o.kind);
    const key = claimKeyOf(attempt.claim);
    const refuse = async (message: string, reason: string) => {
      const { report, state } = reporterFor(
        attempt.token,
        attempt.claim,
        attempt.branchKey,
        attempt.commit,
        o.log.child({
          claim: claimField(attempt.claim),
          applier: applierField(attempt.applier),
          token: attempt.token,
          branch: attempt.branchKey,
        }),
        job,
      );
      await report("RequestFailed", { reason, message });
      return endJob(state);
    };
    if (stopping) return refuse("the sidecar is stopping", StatusReason.SidecarStopping);
    const busy = busyClaim(key);
    if (busy)
      return refuse(
        `operation ${busy.token} of this claim is still followed`,
        StatusReason.OperationInFlight,
      );
    const recorded = o.recorded;
    const r = run(
      attempt.token,
      attempt.claim,
      attempt.branchKey,
      attempt.commit,
      (report, signal) => o.executor.execute(attempt, report, signal),
      recorded && (() => recorded(attempt)),
      job,
    );
    await r.done;
    return endJob(r.state);
  }

  const worker = new Worker(attemptsQueue(o.kind), process, {
    connection: bullConnection(o.redisUrl),
    prefix: o.prefix,
    concurrency: o.concurrency ?? 16,
    // A job whose process died is not run again: the operation recorded on the claim is
    // recovered from there, and a new attempt is the branch worker's decision.
    maxStalledCount: 0,
    lockDuration: o.lockDurationMs ?? ATTEMPT_LOCK_MS,
    stalledInterval: o.stalledIntervalMs ?? ATTEMPT_STALLED_CHECK_MS,
  });
  worker.on("error", (err) => o.log.warn({ err: err.message }, "attempt queue error"));
  // A job whose process died (SIGKILL, a crash) is found stalled once its lock runs out. When it
  // recorded nothing on the claim, it started nothing and nothing else would ever end it: the
  // worker would wait for it forever. It is reported RequestFailed, and the worker decides anew.
  worker.on("stalled", (jobId) => void endStalled(jobId));

  async function endStalled(jobId: string) {
    try {
      const job = await Job.fromId(worker, jobId);
      const parsed = Attempt.safeParse(job?.data);
      if (!parsed.success) return;
      const attempt = parsed.data;
      const log = o.log.child({ applier: o.kind, token: attempt.token, branch: attempt.branchKey });
      // Carried out, followed or already ended here: a job left by a process killed after it
      // recorded the attempt, whose operation this process recovered, completed, and whose claim
      // now records a newer one (the record no longer names it), is not lost (seed 22014).
      const accountedFor = () =>
        running.has(attempt.token) ||
        o.following.isFollowed(attempt.token) ||
        o.following.ended(attempt.token) ||
        endsReported.has(attempt.token);
      if (accountedFor()) {
        log.info("a stalled attempt is carried out, followed or ended here; nothing to report");
        return;
      }
      if (!o.recorded) {
        log.warn("an attempt's process died while carrying it out; nothing here can tell what it started");
        return;
      }
      if (await o.recorded(attempt)) {
        log.info("an attempt's process died after recording it; restart recovery follows it");
        return;
      }
      // A recovery may have taken it up and ended it while the claim was read.
      if (accountedFor()) {
        log.info("a stalled attempt is carried out, followed or ended here; nothing to report");
        return;
      }
      const { report } = reporterFor(attempt.token, attempt.claim, attempt.branchKey, attempt.commit, log);
      await report("RequestFailed", {
        reason: StatusReason.SidecarLost,
        message:
          "the sidecar carrying out the attempt ended before it recorded anything; nothing was started",
      });
    } catch (err) {
      o.log.warn({ job: jobId, err: errorMessage(err) }, "could not end a stalled attempt");
    }
  }

  return {
    recover(op) {
      if (stopping || !o.executor.recover) return false;
      const key = claimKeyOf(op.claim);
      if (o.following.isFollowed(op.operation.token) || busyClaim(key)) return false;
      if (o.following.ended(op.operation.token)) return false;
      const claim: ClaimRef = {
        kind: op.claim.type.kind as ClaimRef["kind"],
        namespace: op.claim.namespace,
        name: op.claim.name,
      };
      const recover = o.executor.recover.bind(o.executor);
      // A recovered operation already Unresolved stays counted until it reports another phase.
      if (op.operation.phase === "Unresolved" && op.branchKey)
        o.metrics?.phase(o.kind, op.operation.token, "Unresolved");
      run(op.operation.token, claim, op.branchKey, op.operation.commit, (report, signal) =>
        recover(op, report, signal),
      );
      return true;
    },
    running: () => [...running.keys()],
    supersede(notice) {
      if (!running.has(notice.token)) return;
      o.log.info(
        { token: notice.token, tip: notice.tip },
        "the branch worker found this operation superseded",
      );
      o.executor.supersede?.(notice);
    },
    async stop() {
      if (stopping) return;
      stopping = true;
      const closing = worker.close();
      const all = [...running.values()];
      for (const r of all) r.abort.abort();
      const timeout = new Promise<void>((res) => setTimeout(res, o.stopTimeoutMs ?? 30_000).unref());
      await Promise.race([Promise.allSettled(all.map((r) => r.done)), timeout]);
      try {
        await o.executor.shutdown?.();
      } catch (err) {
        o.log.error({ err: errorMessage(err) }, "executor shutdown failed");
      }
      // Past the bound the consumer's connections are dropped without waiting: the operations
      // are recorded on their claims (restart recovery follows them) and a job taken but not
      // ended is found stalled by the next process.
      const settled = closing.catch(() => {});
      if (!(await closedWithin(worker, settled, Math.min(o.stopTimeoutMs ?? 30_000, CONSUMER_CLOSE_MS))))
        o.log.warn("attempt queue did not close in time; stopping without it");
    },
  };
}
