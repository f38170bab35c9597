/**
 * A write the worker will not commit is settled as refused: it leaves the branch's queue
 * (recorded with the next settle, so `wait=published` answers at once), counts in a metric, sets
 * WriteRefused on its GitTarget with an Event, and reaches the decisions as a refusal notice, as
 * a refused edit does. The branch goes on.
 */
import { type ObjectRef, RefusalNotice } from "../contract.js";
import { refOfChange } from "../scope.js";
import type { BranchContext, BranchState, HeldWrite } from "./branch-state.js";
import { refusedWrite } from "./entry-ledger.js";
import type { WriteRefusal } from "./status.js";
import { recordRefusal } from "./target-status.js";

/** Why a write is refused: a CamelCase rule and the words that explain it. */
export interface Refusal {
  reason: string;
  message: string;
}

export async function refuse(ctx: BranchContext, s: BranchState, h: HeldWrite, why: Refusal): Promise<void> {
  const t = h.write.target;
  const target = `${t.namespace}/${t.name}`;
  const first = h.write.changes[0];
  const ref = first ? (refOfChange(first) as ObjectRef) : undefined;
  const object = ref ? `${ref.kind} ${ref.namespace ? `${ref.namespace}/` : ""}${ref.name}` : undefined;
  ctx.log.warn(
    { write: h.write.id, target, reason: why.reason, message: why.message, object },
    "write refused: settled without a commit",
  );
  s.held.delete(h.write.id);
  refusedWrite(
    s.ledger,
    { entryId: h.entryId, charge: h.charge },
    h.write.id,
    `${why.reason}: ${why.message}`,
  );
  ctx.metrics.refused(ctx.key, target, why.reason);
  const refusal: WriteRefusal = {
    writeId: h.write.id,
    reason: why.reason,
    message: why.message,
    at: ctx.clock.now(),
    ...(object ? { object } : {}),
  };
  await recordRefusal(ctx, s, { namespace: t.namespace, name: t.name }, refusal);
  if (ref && ctx.hooks.onRefusal) {
    const notice = RefusalNotice.safeParse({
      type: "refusal",
      id: `refusal-${h.write.id}`,
      target: t,
      branchKey: ctx.key,
      receivedAt: new Date(ctx.clock.now()).toISOString(),
      object: ref,
      reason: `${why.reason}: ${why.message}`.slice(0, 4000),
      author: h.write.author,
    });
    if (notice.success) await ctx.hooks.onRefusal(notice.data);
  }
  await ctx.hooks.onRefused?.(h.write, why.message);
}
