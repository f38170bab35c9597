/**
 * Sends reports to the branch worker as BullMQ jobs on the reports queue (job data = a Report).
 * Used by the executor for phases and by window observers for the applier's own writes.
 */
import { Queue } from "bullmq";
import { type ApplierWriteReport, type PhaseReport, QUEUES, Report } from "../queue/contract.js";
import { bullConnection } from "../queue/redis.js";

export interface Reporter {
  send(report: Report): Promise<void>;
  phase(report: Omit<PhaseReport, "type">): Promise<void>;
  applierWrite(report: Omit<ApplierWriteReport, "type">): Promise<void>;
  close(): Promise<void>;
}

export interface QueueReporterOptions {
  redisUrl: string;
  prefix: string;
}

/** Validates every report (a bad one is a bug here, never sent) and queues it. */
export function queueReporter(opts: QueueReporterOptions): Reporter {
  const queue = new Queue(QUEUES.reports, {
    connection: bullConnection(opts.redisUrl),
    prefix: opts.prefix,
    defaultJobOptions: { removeOnComplete: 1000, removeOnFail: 5000 },
  });
  // A Redis blip is survived by the connection's offline queue (reports wait, none is lost); the
  // listener keeps the connection errors from surfacing as unhandled 'error' events.
  queue.on("error", () => {});
  const send = async (report: Report) => {
    const valid = Report.parse(report);
    await queue.add(valid.type, valid);
  };
  return {
    send,
    phase: (r) => send({ type: "phase", ...r }),
    applierWrite: (r) => send({ type: "applierWrite", ...r }),
    close: () => queue.close(),
  };
}

/** Keeps reports in memory, for tests of kinds that need no Redis. */
export function memoryReporter(): Reporter & { reports: Report[] } {
  const reports: Report[] = [];
  const send = async (r: Report) => {
    reports.push(Report.parse(r));
  };
  return {
    reports,
    send,
    phase: (r) => send({ type: "phase", ...r }),
    applierWrite: (r) => send({ type: "applierWrite", ...r }),
    close: async () => {},
  };
}
