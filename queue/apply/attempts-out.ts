/**
 * What the decision driver asks of the attempts queues: put an attempt on its applier kind's queue
 * (three tries; one that cannot be queued ends RequestFailed, which gives its reasons back), and,
 * at a takeover, which attempts the last owner sent are still unfinished there.
 */
import type { ApplierKind, Attempt, ClaimRef, PhaseReport } from "../contract.js";
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

/** An operation out, as the attempts queues know it. */
interface OutAttempt {
  kind: ApplierKind;
  token: string;
  claim?: ClaimRef;
}

/**
 * The tokens of `ops` whose attempt the attempts queues still hold unfinished (waiting for an
 * executor, or taken by one); `unreadable` answers for one whose queue could not be read.
 * Undefined when the sender cannot tell.
 */
async function stillQueued(
  ops: OutAttempt[],
  sender: AttemptSender,
  unreadable: (op: OutAttempt, err: unknown) => boolean,
): Promise<string[] | undefined> {
  const queued = sender.queued?.bind(sender);
  if (!queued) return undefined;
  const read = await Promise.all(
    ops.map(async (op) =>
      (await queued(op.kind, op.token).catch((err) => unreadable(op, err))) ? [op.token] : [],
    ),
  );
  return read.flat();
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
  const ops = Object.values(saved.appliers).flatMap((a) =>
    a.operation ? [{ kind: a.applier.kind, token: a.operation.token, claim: a.claim }] : [],
  );
  const queued = await stillQueued(ops, sender, (op, err) => {
    log.warn(
      { claim: op.claim && claimField(op.claim), token: op.token, err: errorMessage(err) },
      "could not read whether the last owner's attempt is still queued; its reasons are given back",
    );
    return false;
  });
  return queued ?? [];
}

/**
 * Of the operations a check reads (`operationsToCheck`), those whose attempt the queues still hold
 * unfinished; one that cannot be read counts as unfinished (nothing is taken for lost on a failed
 * read). Undefined when the sender cannot tell: no attempt is then taken for lost.
 */
export function unfinishedAttempts(
  checks: { kind: ApplierKind; token: string }[],
  sender: AttemptSender,
): Promise<string[] | undefined> {
  return stillQueued(checks, sender, () => true);
}
