/**
 * Presence and balancing of one replica: its heartbeat in Redis (which counts the live replicas
 * and the branches each owns), the fair share read back, and, while it owns more than its share,
 * the quiet branches it hands over a few at a time (docs/design/balancing.md). What to hand over
 * is the pure `decideHandover` (balance.ts); this carries it out, one presence round at a time.
 */
import type { Redis } from "ioredis";
import { errorMessage } from "../errors.js";
import type { Logger } from "../log.js";
import { type BalanceSettings, decideHandover, type OwnedBranch, takeBudget } from "./balance.js";
import { announce, leave } from "./presence.js";

export interface ReplicaBalanceOptions {
  redis: Redis;
  prefix: string;
  replicaId: string;
  leaseMs: number;
  /** Balancing on; off, the replica still announces itself, so the others count it. */
  enabled: boolean;
  settings: BalanceSettings & { periodMs: number };
  /** How many branch workers run here now. */
  running(): number;
  /**
   * The branches owned now: those running or starting (when each was taken, and whether it may
   * move: quiet), and how many wait, not started or not read yet (`BalanceInput.waiting`).
   */
  owned(): { running: OwnedBranch[]; waiting: number };
  /** Hands one branch over: its worker stopped, its lease given back with a marker. */
  handOver(key: string): Promise<void>;
  /** Gives `count` waiting branches back with a marker, before anything was read for them here. */
  giveBack(count: number): Promise<void>;
  stopping(): boolean;
  log: Logger;
}

export class ReplicaBalance {
  /** The fair share as last read (undefined until the first heartbeat answered). */
  private share: number | undefined;
  private handingOver = false;
  /** The presence round under way (heartbeat, then the hand-overs it decided). */
  private round: Promise<void> | undefined;

  constructor(private readonly o: ReplicaBalanceOptions) {}

  /** How many handed-over leases this replica may take beside `owned` branches: any when not balancing. */
  room(owned: number): number {
    return this.o.enabled ? takeBudget(owned, this.share) : Number.POSITIVE_INFINITY;
  }

  /** One presence round: the heartbeat, then (balancing) the hand-overs it decides. */
  presence(): Promise<void> {
    if (this.o.stopping()) return Promise.resolve();
    this.round ??= this.step().finally(() => {
      this.round = undefined;
    });
    return this.round;
  }

  /** Waits for the round under way, then leaves the count. */
  async leave(): Promise<void> {
    await this.round;
    await leave(this.o.redis, this.o.prefix, this.o.replicaId).catch(() => {});
  }

  private async step(): Promise<void> {
    const { o } = this;
    try {
      // Shorter than a lease: a dead replica leaves the count before its leases lapse, so the
      // replicas taking them over do not hand branches over on its account meanwhile.
      const ttl = Math.max(Math.ceil(o.leaseMs / 2), Math.ceil(1.5 * o.settings.periodMs));
      const fleet = await announce(o.redis, o.prefix, o.replicaId, ttl, o.running());
      if (o.stopping()) return;
      const now = Date.now();
      const { running: owned, waiting } = o.owned();
      const d = decideHandover(
        { known: fleet.known, live: fleet.live, owned, waiting, now, handingOver: this.handingOver },
        o.settings,
      );
      this.share = d.share;
      if (!o.enabled) return;
      if (d.handingOver !== this.handingOver)
        o.log.info(
          {
            replica: o.replicaId,
            owned: owned.length,
            waiting,
            share: d.share,
            live: fleet.live,
            known: fleet.known,
          },
          d.handingOver ? "over the fair share: handing branches over" : "down to the fair share",
        );
      this.handingOver = d.handingOver;
      if (o.stopping()) return;
      if (d.giveBack > 0) await o.giveBack(d.giveBack);
      // Each hand-over stops its own branch worker: a round of fifty goes at once, not one by one.
      await Promise.all(d.handOver.map((key) => o.handOver(key)));
    } catch (err) {
      o.log.warn({ err: errorMessage(err) }, "presence round failed");
    }
  }
}
