/**
 * Progress as it happens, read from the queues without consuming them: push notices arriving,
 * every apply attempt the worker sends (with its reasons), and every phase the sidecars report
 * (Requested → Running → Settling → Succeeded, with the commit and the reason). A QueueEvents
 * stream per queue tells that a job was added; the job's data is then read by id (the producers
 * keep completed jobs for a while, which is also what the dashboard shows).
 */
import { type Job, Queue, QueueEvents } from "bullmq";
import {
  type ApplierKind,
  type Attempt,
  attemptsQueue,
  type Notice,
  type PhaseReport,
  QUEUES,
  type Report,
} from "../../queue/contract.js";
import { bullConnection } from "../../queue/redis.js";

export type ProgressEvent =
  | { type: "notice"; at: Date; notice: Notice }
  | { type: "attempt"; at: Date; attempt: Attempt }
  | { type: "phase"; at: Date; report: PhaseReport; attempt?: Attempt };

export interface ProgressObserver {
  readonly events: ProgressEvent[];
  /** Phase reports seen so far, in arrival order. */
  phases(): PhaseReport[];
  /** Attempts seen so far, in order. */
  attempts(): Attempt[];
  /** Jobs the queues announced whose data is not read yet (their events are on their way). */
  unread(): number;
  /** Resolves once every job announced so far is read (its event emitted). */
  drained(): Promise<void>;
  stop(): Promise<void>;
}

export async function observeProgress(o: {
  redisUrl: string;
  prefix: string;
  onEvent?: (e: ProgressEvent) => void;
  kinds?: ApplierKind[];
  /** Keep a phase reported twice for one token (the soak counts end reports); default: show it once. */
  repeats?: boolean;
}): Promise<ProgressObserver> {
  const connection = bullConnection(o.redisUrl);
  const events: ProgressEvent[] = [];
  const attempts = new Map<string, Attempt>();
  const closers: Array<() => Promise<void>> = [];
  // Jobs are read in the order their "added" events arrive, one at a time, so output keeps order.
  let chain: Promise<void> = Promise.resolve();
  let unread = 0;
  const emit = (e: ProgressEvent) => {
    events.push(e);
    o.onEvent?.(e);
  };

  const watch = async (name: string, handle: (job: Job) => void) => {
    const queue = new Queue(name, { connection, prefix: o.prefix });
    const qe = new QueueEvents(name, { connection, prefix: o.prefix, autorun: true });
    qe.on("error", () => {});
    queue.on("error", () => {});
    await qe.waitUntilReady();
    qe.on("added", ({ jobId }) => {
      unread += 1;
      chain = chain.then(async () => {
        const job = await queue.getJob(jobId).catch(() => undefined);
        unread -= 1;
        if (job) handle(job);
      });
    });
    closers.push(async () => {
      await qe.close();
      await queue.close();
    });
  };

  await watch(QUEUES.notices, (job) =>
    emit({ type: "notice", at: new Date(job.timestamp), notice: job.data }),
  );
  for (const kind of o.kinds ?? (["flux", "argocd"] as ApplierKind[])) {
    await watch(attemptsQueue(kind), (job) => {
      const attempt = job.data as Attempt;
      attempts.set(attempt.token, attempt);
      emit({ type: "attempt", at: new Date(job.timestamp), attempt });
    });
  }
  const seen = new Set<string>();
  await watch(QUEUES.reports, (job) => {
    const report = job.data as Report;
    if (report.type !== "phase") return;
    // A phase reported twice (a follower and a resync both saw it) is shown once.
    const key = `${report.token}/${report.phase}`;
    if (seen.has(key) && !o.repeats) return;
    seen.add(key);
    const attempt = attempts.get(report.token);
    emit({ type: "phase", at: new Date(job.timestamp), report, ...(attempt ? { attempt } : {}) });
  });

  return {
    events,
    phases: () => events.flatMap((e) => (e.type === "phase" ? [e.report] : [])),
    attempts: () => events.flatMap((e) => (e.type === "attempt" ? [e.attempt] : [])),
    unread: () => unread,
    drained: () => chain,
    async stop() {
      await chain;
      await Promise.all(closers.map((c) => c()));
    },
  };
}

const short = (sha: string | undefined) => (sha ? sha.slice(0, 8) : "-");
const clock = (d: Date) => d.toISOString().slice(11, 23);

/** One line per event, for the playground's screen. */
export function formatProgress(e: ProgressEvent): string {
  if (e.type === "notice") {
    const n = e.notice;
    return n.type === "push"
      ? `${clock(e.at)}  push notice   ${n.branch} ${short(n.before)} → ${short(n.after)}  (delivery ${n.deliveryId})`
      : `${clock(e.at)}  refusal       ${n.target.namespace}/${n.target.name} ${n.object.kind}/${n.object.name}: ${n.reason}`;
  }
  if (e.type === "attempt") {
    const a = e.attempt;
    const reasons = [...new Set(a.targets.map((t) => t.reason))].join(",");
    return `${clock(e.at)}  apply sent    ${a.applier.kind.padEnd(6)} ${a.applier.namespace}/${a.applier.name}  commit ${short(a.commit)}  reason ${reasons}  op ${a.token}`;
  }
  const r = e.report;
  const kind = r.claim.kind === "FluxClaim" ? "flux" : r.claim.kind === "ArgoCDClaim" ? "argocd" : "webhook";
  const why = [r.reason, r.message].filter(Boolean).join(": ");
  const reasons = e.attempt ? [...new Set(e.attempt.targets.map((t) => t.reason))].join(",") : undefined;
  return `${clock(e.at)}  ${r.phase.padEnd(12)}  ${kind.padEnd(6)} ${r.claim.namespace}/${r.claim.name}  commit ${short(r.commit ?? e.attempt?.commit)}${reasons ? `  reason ${reasons}` : ""}${why ? `  (${why})` : ""}  op ${r.token}`;
}
