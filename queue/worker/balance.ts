/**
 * Balancing branches between worker replicas: the decisions, pure. Every replica announces itself
 * in Redis (queue/worker/presence.ts) and learns how many replicas live and how many branches are
 * known; from that and the branches it owns it decides here which to hand over (a graceful stop
 * that gives the lease back with a hand-over marker) and how many handed-over leases it may take.
 * The shell (queue/worker/replica.ts) carries it out. See docs/design/balancing.md.
 */

export interface BalanceSettings {
  /**
   * Branches handed over at most per round (one round per balance period): this many, or
   * `sharePerRound` of the share when that is more.
   */
  perRound: number;
  /**
   * The part of its share a replica may hand over in one round: a replica of any size evens out
   * in about as many rounds (a tenth: ten rounds, 20 s at the default period).
   */
  sharePerRound: number;
  /** A branch this replica took less than this long ago is not handed over (no ping-pong). */
  minHoldMs: number;
}

export const DEFAULT_BALANCE: BalanceSettings = { perRound: 8, sharePerRound: 0.1, minHoldMs: 5_000 };

/** A branch the replica owns, as the decision sees it. */
export interface OwnedBranch {
  key: string;
  /** When this replica took it (epoch ms). */
  takenAt: number;
  /** Nothing under way on it: no write held or being pushed, no attempt out, no window open. */
  quiet: boolean;
}

export interface BalanceInput {
  /** Branches known (the set every replica sweeps). */
  known: number;
  /** Replicas whose heartbeat lives, this one included. */
  live: number;
  owned: readonly OwnedBranch[];
  /**
   * Branches this replica took and has read nothing for yet: not started (its start queue), or
   * whose branch workers wait for their first read. They count as owned, and go back first, all at
   * once, as nothing was read for them.
   */
  waiting?: number;
  now: number;
  /** Whether the previous round was handing over (the band's memory). */
  handingOver: boolean;
}

export interface BalanceDecision {
  /** The fair share: ceil(known / live). */
  share: number;
  /** Over share + slack starts a hand-over; it goes on until the replica is down to its share. */
  handingOver: boolean;
  /** Branches to hand over now, in order. */
  handOver: string[];
  /** How many waiting branches to give back now (with a hand-over marker, nothing read for them here). */
  giveBack: number;
}

/** ceil(known / live), with at least one replica (this one) alive. */
export function fairShare(known: number, live: number): number {
  return Math.ceil(Math.max(0, known) / Math.max(1, live));
}

/** How far over its share a replica may be before it hands over: 10 % of the share, at least 1. */
export function slackOf(share: number): number {
  return Math.max(1, Math.floor(share / 10));
}

/**
 * Which branches to hand over this round. A replica owning more than its share plus the slack
 * starts handing over and goes on, round after round, until it owns its share (a band, so a
 * replica at the edge does not flap). Waiting branches (nothing read for them yet) go back first,
 * all of them that are over the share; then each round hands over at most `handoverRate` running
 * ones, only quiet branches held at least `minHoldMs`, the longest held first (then by key).
 */
export function decideHandover(
  input: BalanceInput,
  settings: BalanceSettings = DEFAULT_BALANCE,
): BalanceDecision {
  const waiting = Math.max(0, input.waiting ?? 0);
  const owned = input.owned.length + waiting;
  // A replica cannot own more than is known; a count read before the set grew is a floor.
  const share = fairShare(Math.max(input.known, owned), input.live);
  const handingOver = owned > share + slackOf(share) || (input.handingOver && owned > share);
  if (!handingOver) return { share, handingOver, handOver: [], giveBack: 0 };
  // Replicas started together: the first to sweep took every branch, most of them not read yet.
  // Those go back at once (no rate: nothing was read for them).
  const giveBack = Math.min(waiting, owned - share);
  const room = Math.min(owned - share - giveBack, handoverRate(share, settings));
  const handOver = input.owned
    .filter((b) => b.quiet && input.now - b.takenAt >= settings.minHoldMs)
    .sort((a, b) => a.takenAt - b.takenAt || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
    .slice(0, room)
    .map((b) => b.key);
  return { share, handingOver, handOver, giveBack };
}

/** Branches handed over at most in one round: `perRound`, or `sharePerRound` of the share when more. */
export function handoverRate(share: number, settings: BalanceSettings): number {
  return Math.max(0, settings.perRound, Math.ceil(share * Math.max(0, settings.sharePerRound)));
}

/**
 * How many handed-over leases a replica may take now: while under its share, up to the share.
 * Leases nobody hands over (a dead replica's, a stopped one's, a new branch's) are taken by any
 * replica at once; only hand-overs wait for the replicas under their share (until their marker
 * lapses). Unknown share (no heartbeat answered yet): no limit.
 */
export function takeBudget(owned: number, share: number | undefined): number {
  if (share === undefined) return Number.POSITIVE_INFINITY;
  return Math.max(0, share - owned);
}
