/**
 * What the decision driver asks of the attempts queues: put an attempt on its applier kind's queue
 * (three tries; one that cannot be queued ends RequestFailed, which gives its reasons back), and,
 * at a takeover, which attempts the last owner sent are still unfinished there.
 */
import type { ApplierKind, Attempt, PhaseReport } from "../contract.js";
import { StatusReason } from "../crds/reasons.js";
import type { DecisionState } from "../decide/index.js";
import { errorMessage } from "../errors.js";
import { applierField, claimField, type Logger } from "../log.js";

/** Puts an attempt on its applier kind's queue. */
export interface AttemptSender {
  send(attempt: Attempt): Promise<void>;
  /**
   * Whether the queue still holds the attempt `token` unfinished: waiting for an executor, or
   * taken by one. Without it, no attempt of an earlier owner counts as queued.
   */
  queued?(kind: ApplierKind, token: string): Promise<boolean>;
}

/** Sends the attempt; answers the RequestFailed report to feed when it could not be queued. */
export async function sendAttempt(
  sender: AttemptSender,
  attempt: Attempt,
  parent: Logger,
  now: () => number,
): Promise<PhaseReport | undefined> {
  const log = parent.child({
    claim: claimField(attempt.claim),
    applier: applierField(attempt.applier),
    token: attempt.token,
    commit: attempt.commit,
  });
  for (let i = 1; ; i++) {
    try {
      await sender.send(attempt);
      log.info({ targets: attempt.targets }, "apply attempt sent");
      return undefined;
    } catch (err) {
      if (i < 3) continue;
      // Nothing was started: the attempt ends RequestFailed, which gives its reasons back.
      log.warn({ err: errorMessage(err) }, "apply attempt could not be queued");
      return {
        type: "phase",
        token: attempt.token,
        claim: attempt.claim,
        branchKey: attempt.branchKey,
        phase: "RequestFailed",
        at: new Date(now()).toISOString(),
        reason: StatusReason.QueueUnavailable,
      };
    }
  }
}

/**
 * The saved operations out whose attempt the attempts queue still holds unfinished. One that
 * cannot be read counts as not queued: its reasons are given back, as before the queue was read,
 * and the executor refuses a second record while the first is in flight.
 */
export async function queuedAttempts(
  saved: DecisionState,
  sender: AttemptSender,
  log: Logger,
): Promise<string[]> {
  const queued: string[] = [];
  for (const a of Object.values(saved.appliers)) {
    const op = a.operation;
    if (!op || !sender.queued) continue;
    try {
      if (await sender.queued(a.applier.kind, op.token)) queued.push(op.token);
    } catch (err) {
      log.warn(
        { claim: claimField(a.claim), token: op.token, err: errorMessage(err) },
        "could not read whether the last owner's attempt is still queued; its reasons are given back",
      );
    }
  }
  return queued;
}

/**
 * Of the operations a check reads (`operationsToCheck`), those whose attempt the queues still hold
 * unfinished; one that cannot be read counts as unfinished (nothing is taken for lost on a failed
 * read). Undefined when the sender cannot tell: no attempt is then taken for lost.
 */
export async function unfinishedAttempts(
  checks: { kind: ApplierKind; token: string }[],
  sender: AttemptSender,
): Promise<string[] | undefined> {
  const queued = sender.queued?.bind(sender);
  if (!queued) return undefined;
  const read = await Promise.all(
    checks.map(async ({ kind, token }) => ((await queued(kind, token).catch(() => true)) ? [token] : [])),
  );
  return read.flat();
}
