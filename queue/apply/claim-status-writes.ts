/**
 * The branch worker's writes to claims' status (repairPending, the governance gate, the Retrying
 * condition, lastHandledReconcileAt): in the background, in order per claim, so a slow API server
 * never holds a decision; a failed write is logged, and the next decision writes again.
 */
import type { ClaimRef } from "../contract.js";
import type { ClaimGate, RetryView } from "../decide/index.js";
import { errorMessage } from "../errors.js";
import { claimStatusField } from "../kube/readers.js";
import type { KObject } from "../kube/resources.js";
import { claimField, type Logger } from "../log.js";
import type { ObjectSource } from "./catalog.js";
import { gatePatch } from "./governance.js";
import { retryPatch } from "./retry-condition.js";

export class ClaimStatusWrites {
  private readonly chains = new Map<string, Promise<void>>();

  constructor(
    private readonly objects: ObjectSource,
    private readonly now: () => number,
    private readonly log: Logger,
  ) {}

  repairPending(claim: ClaimRef, pending: boolean): void {
    this.write(claim, "writing repairPending failed", (c) =>
      (claimStatusField(c, "repairPending") === true) === pending ? undefined : { repairPending: pending },
    );
  }

  gate(claim: ClaimRef, gate: ClaimGate): void {
    this.write(claim, "writing the claim's governance status", (c) => gatePatch(c, gate, this.now()));
  }

  reconcileHandled(claim: ClaimRef, requestedAt: string): void {
    this.write(claim, "writing lastHandledReconcileAt failed", (c) =>
      claimStatusField(c, "lastHandledReconcileAt") === requestedAt
        ? undefined
        : { lastHandledReconcileAt: requestedAt },
    );
  }

  retry(claim: ClaimRef, retry: RetryView | null): void {
    this.write(claim, "writing the claim's Retrying condition", (c) => retryPatch(c, retry, this.now()));
  }

  /** Resolves once every write asked so far has ended. */
  async settled(): Promise<void> {
    await Promise.all(this.chains.values());
  }

  private write(
    claim: ClaimRef,
    what: string,
    patch: (current: KObject) => Record<string, unknown> | undefined,
  ): void {
    const key = `${claim.kind}/${claim.namespace}/${claim.name}`;
    const prev = this.chains.get(key) ?? Promise.resolve();
    const next = prev
      .then(() => this.objects.patchClaimStatus(claim, patch))
      .then(
        () => undefined,
        (err) => this.log.warn({ claim: claimField(claim), err: errorMessage(err) }, what),
      );
    this.chains.set(key, next);
    void next.then(() => {
      if (this.chains.get(key) === next) this.chains.delete(key);
    });
  }
}
