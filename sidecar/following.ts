/**
 * Which operations this process follows, by token. The claim reconciler leaves an operation in
 * flight alone while it is followed here (or for a minute after it first saw it unfollowed, so
 * restart recovery gets its chance); after that it settles it as OperationUnfollowed.
 */
import type { ReportPhase } from "../queue/contract.js";

export interface FollowedOperation {
  token: string;
  /** namespace/name of the claim. */
  claim: string;
  since: Date;
}

/** How many ended tokens are remembered (oldest forgotten first). */
const ENDED_MEMORY = 4096;

/** Tokens remembered with a value each, the last `size` of them (the oldest forgotten first). */
export class RecentTokens<V = true> {
  private readonly tokens = new Map<string, V>();

  constructor(private readonly size = ENDED_MEMORY) {}

  add(token: string, ...value: V extends true ? [] : [V]): void {
    this.tokens.set(token, (value[0] ?? true) as V);
    if (this.tokens.size > this.size) this.tokens.delete(this.tokens.keys().next().value as string);
  }

  has(token: string): boolean {
    return this.tokens.has(token);
  }

  get(token: string): V | undefined {
    return this.tokens.get(token);
  }
}

export class Following {
  private readonly byToken = new Map<string, FollowedOperation>();
  private readonly listeners = new Set<(claim: string) => void>();
  /**
   * Operations this process carried to their end. A reconciler pass that read the claim before
   * the end was written can offer one to recovery after it stopped being followed; following it
   * again would report its end a second time.
   */
  private readonly endedTokens = new RecentTokens<{ phase: ReportPhase | undefined }>();

  constructor(private readonly now: () => Date = () => new Date()) {}

  /**
   * Starts following; returns the function that stops, told whether the operation's end was
   * reported (it is then remembered as ended before it stops being followed, so no recovery can
   * slip in between). Following one token twice is refused.
   */
  follow(token: string, claim: string): (end?: { ended: boolean; phase?: ReportPhase }) => void {
    if (this.byToken.has(token)) throw new Error(`operation ${token} is already followed`);
    const entry = { token, claim, since: this.now() };
    this.byToken.set(token, entry);
    let done = false;
    return (end) => {
      if (done) return;
      done = true;
      if (end?.ended) this.endedTokens.add(token, { phase: end.phase });
      if (this.byToken.get(token) === entry) this.byToken.delete(token);
      for (const l of this.listeners) l(claim);
    };
  }

  /**
   * Remembers an end this process reported without following the operation: one an earlier
   * process recorded on the claim and the claim reconciler reported again. The attempt's job,
   * found stalled once the dead process's lock ran out, is then not reported lost as well, even
   * when the claim records a newer operation by then (soak seed 60068).
   */
  reportedEnd(token: string, phase: ReportPhase | undefined): void {
    this.endedTokens.add(token, { phase });
  }

  isFollowed(token: string): boolean {
    return this.byToken.has(token);
  }

  /** Whether this process followed the operation to a reported end. */
  ended(token: string): boolean {
    return this.endedTokens.has(token);
  }

  /** The end this process reported for the operation, when it followed it to one. */
  endedAs(token: string): ReportPhase | undefined {
    return this.endedTokens.get(token)?.phase;
  }

  /** The token this process follows for a claim, if any. */
  forClaim(claim: string): string | undefined {
    for (const e of this.byToken.values()) if (e.claim === claim) return e.token;
    return undefined;
  }

  list(): FollowedOperation[] {
    return [...this.byToken.values()];
  }

  /** Called with the claim's key whenever an operation stops being followed. */
  onRelease(listener: (claim: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

/**
 * Tracks since when each in-flight operation has been seen unfollowed (pure state, fed by the
 * reconciler): it is settled only after `graceMs` without anybody following it.
 */
export class UnfollowedClock {
  private readonly firstSeen = new Map<string, number>();

  constructor(private readonly graceMs = 60_000) {}

  /** Observes the token (followed or not) at `now`; true once it is past the grace period. */
  overdue(token: string, followed: boolean, now: Date): boolean {
    if (followed) {
      this.firstSeen.delete(token);
      return false;
    }
    const first = this.firstSeen.get(token);
    if (first === undefined) {
      this.firstSeen.set(token, now.getTime());
      return false;
    }
    return now.getTime() - first > this.graceMs;
  }

  /** Time left before the token is overdue (for a requeue), or undefined when not tracked. */
  remainingMs(token: string, now: Date): number | undefined {
    const first = this.firstSeen.get(token);
    return first === undefined ? undefined : Math.max(0, first + this.graceMs - now.getTime() + 1);
  }

  forget(token: string): void {
    this.firstSeen.delete(token);
  }
}
