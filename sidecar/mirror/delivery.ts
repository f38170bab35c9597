/**
 * Handing the mirror's writes to their branches' inboxes through the intake gate, one chain per
 * branch so one object's writes arrive in order; a paused branch is asked again after the time it
 * names, a failure after a second, until the mirror stops.
 */
import { randomUUID } from "node:crypto";
import type { Queue } from "bullmq";
import type { Redis } from "ioredis";
import type { AcceptedWrite } from "../../queue/contract.js";
import { errorMessage } from "../../queue/errors.js";
import { acceptWrite } from "../../queue/intake.js";
import type { Logger } from "../../queue/log.js";
import type { ResolvedTarget } from "./targets.js";
import type { WriteBody } from "./translate.js";

export interface DeliveryOptions {
  redis: Redis;
  redisPrefix: string;
  branches: Queue;
  log: Logger;
  now: () => number;
  /** Whether the mirror is stopping: a write not handed over yet is tried once more, no longer. */
  stopping: () => boolean;
}

export interface DeliveryHooks {
  /** The write is in its inbox. */
  accepted(write: AcceptedWrite): void;
  /** Handing it over failed; it is tried again. */
  failed(message: string): void;
}

export class Delivery {
  /** One chain of sends per branch, so one object's writes reach its inbox in order. */
  private readonly chains = new Map<string, Promise<void>>();
  /** Writes handed to an inbox, in order (tests and the playground read it). */
  readonly sent: AcceptedWrite[] = [];
  /** The initial-snapshot markers handed to an inbox, in order. */
  readonly markers: AcceptedWrite[] = [];

  constructor(private readonly o: DeliveryOptions) {}

  send(target: ResolvedTarget, w: WriteBody, hooks: DeliveryHooks): void {
    const write: AcceptedWrite = {
      ...w,
      id: `m-${randomUUID()}`,
      target: { namespace: target.namespace, name: target.name, ...(target.uid ? { uid: target.uid } : {}) },
      branchKey: target.branchKey,
      path: target.path,
      acceptedAt: new Date(this.o.now()).toISOString(),
    };
    const chain = (this.chains.get(target.branchKey) ?? Promise.resolve()).then(() =>
      this.deliver(write, hooks),
    );
    this.chains.set(target.branchKey, chain);
    void chain.finally(() => {
      if (this.chains.get(target.branchKey) === chain) this.chains.delete(target.branchKey);
    });
  }

  /** Resolves once every write sent so far has reached its inbox (or the mirror stopped). */
  async idle(): Promise<void> {
    for (;;) {
      const pending = [...this.chains.values()];
      await Promise.all(pending);
      if (pending.every((p, i) => [...this.chains.values()][i] === p)) return;
    }
  }

  private async deliver(write: AcceptedWrite, hooks: DeliveryHooks): Promise<void> {
    const { log } = this.o;
    for (let tries = 0; !this.o.stopping() || tries === 0; tries++) {
      try {
        const r = await acceptWrite(this.o.redis, this.o.redisPrefix, write, this.o.branches, (err) =>
          log.warn({ err: errorMessage(err), branch: write.branchKey }, "branch signal failed"),
        );
        if (r.accepted) {
          if (write.initialSnapshots) this.markers.push(write);
          else this.sent.push(write);
          hooks.accepted(write);
          log.debug(
            {
              branch: write.branchKey,
              write: write.id,
              author: write.author.name,
              applier: write.applierAuthored?.manager,
            },
            "watched write handed to the branch worker",
          );
          return;
        }
        await new Promise((r2) => setTimeout(r2, r.retryAfterSeconds * 1000).unref?.());
      } catch (err) {
        hooks.failed(`handing a write to ${write.branchKey}: ${errorMessage(err)}`);
        await new Promise((r2) => setTimeout(r2, 1000).unref?.());
      }
    }
  }
}
