/**
 * Sends reports to the branch worker as BullMQ jobs on the reports queue (job data = a Report).
 * Used by the executor for phases and by window observers for the applier's own writes.
 */
import { isDeepStrictEqual } from "node:util";
import { Job, Queue } from "bullmq";
import {
  type ApplierWriteReport,
  type PhaseReport,
  QUEUES,
  Report,
  TERMINAL_PHASES,
} from "../queue/contract.js";
import { bullConnection } from "../queue/redis.js";

/**
 * Whether a report was queued; `"alreadyEnded"` for a terminal phase of an operation whose end was
 * queued before (by this process or any other): it is dropped.
 */
export type Sent = "queued" | "alreadyEnded";

export interface Reporter {
  send(report: Report): Promise<Sent>;
  phase(report: Omit<PhaseReport, "type">): Promise<Sent>;
  applierWrite(report: Omit<ApplierWriteReport, "type">): Promise<Sent>;
  close(): Promise<void>;
}

export interface QueueReporterOptions {
  redisUrl: string;
  prefix: string;
}

/**
 * How long an operation's queued end keeps a second end out. A sidecar killed after it reported
 * an end forgets it; the next process may find that operation's job stalled (within seconds of the
 * lock running out) or its end on the claim, and must not end it again (seed 162072).
 */
export const END_MEMORY_MS = 24 * 60 * 60 * 1000;

/** The deduplication id of a report that ends its operation; undefined for any other report. */
export function endOf(report: Report): string | undefined {
  return report.type === "phase" && TERMINAL_PHASES.includes(report.phase)
    ? `end:${report.token}`
    : undefined;
}

/**
 * Validates every report (a bad one is a bug here, never sent) and queues it. An operation ends
 * once: its first terminal report, from whichever process, is the one the worker gets; Redis keeps
 * that mark atomically with the job, so a later end (a stalled check, a claim's end reported again,
 * a retry of an add whose reply was lost) is dropped.
 */
export function queueReporter(opts: QueueReporterOptions): Reporter {
  const queue = new Queue(QUEUES.reports, {
    connection: bullConnection(opts.redisUrl),
    prefix: opts.prefix,
    defaultJobOptions: { removeOnComplete: 1000, removeOnFail: 5000 },
  });
  // A Redis blip is survived by the connection's offline queue (reports wait, none is lost); the
  // listener keeps the connection errors from surfacing as unhandled 'error' events.
  queue.on("error", () => {});
  const send = async (report: Report): Promise<Sent> => {
    const valid = Report.parse(report);
    const end = endOf(valid);
    if (end === undefined) {
      await queue.add(valid.type, valid);
      return "queued";
    }
    // BullMQ answers a deduplicated add with the first end's job (ids stay the queue's own
    // counter, so reports keep their order by id); that job holds another report than this one.
    const job = await queue.add(valid.type, valid, { deduplication: { id: end, ttl: END_MEMORY_MS } });
    const kept = job.id === undefined ? undefined : await Job.fromId(queue, job.id);
    return kept !== undefined && isDeepStrictEqual(kept.data, JSON.parse(JSON.stringify(valid)))
      ? "queued"
      : "alreadyEnded";
  };
  return {
    send,
    phase: (r) => send({ type: "phase", ...r }),
    applierWrite: (r) => send({ type: "applierWrite", ...r }),
    close: () => queue.close(),
  };
}

/** Keeps reports in memory, for tests of kinds that need no Redis; an operation ends once here too. */
export function memoryReporter(): Reporter & { reports: Report[] } {
  const reports: Report[] = [];
  const ended = new Set<string>();
  const send = async (r: Report): Promise<Sent> => {
    const valid = Report.parse(r);
    const end = endOf(valid);
    if (end !== undefined && ended.has(end)) return "alreadyEnded";
    if (end !== undefined) ended.add(end);
    reports.push(valid);
    return "queued";
  };
  return {
    reports,
    send,
    phase: (r) => send({ type: "phase", ...r }),
    applierWrite: (r) => send({ type: "applierWrite", ...r }),
    close: async () => {},
  };
}
