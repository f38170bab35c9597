/**
 * The decision state of one branch in Redis (JSON under `branchKeys(...).decisions`). Written only
 * while the caller holds the branch's lease, checked in the same script, so a replica that lost
 * the branch can never overwrite what the new owner decided.
 */
import type { Redis } from "ioredis";
import { type DecisionState, isGitAhead } from "../decide/index.js";
import { branchKeys } from "../keys.js";
import type { ApplyState } from "../records.js";
import { fencedWrite } from "../worker/lease.js";

// KEYS: lease, decisions, apply state. ARGV: lease token, state JSON, apply state JSON.
const save = fencedWrite("redis.call('SET', KEYS[2], ARGV[2])\nredis.call('SET', KEYS[3], ARGV[3])");

/** The apply state (queue/records.ts) a decision state publishes. */
export const applyStateOf = (s: DecisionState): ApplyState => ({
  epoch: s.applyEpoch ?? 0,
  gitAhead: isGitAhead(s),
});

export class DecisionStore {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    readonly branchKey: string,
  ) {}

  private get keys() {
    return branchKeys(this.prefix, this.branchKey);
  }

  async load(): Promise<DecisionState | undefined> {
    const raw = await this.redis.get(this.keys.decisions);
    if (!raw) return undefined;
    try {
      return JSON.parse(raw) as DecisionState;
    } catch {
      return undefined; // unreadable: start over from the claims' status, as after a loss
    }
  }

  /**
   * Saves the state (`json`: its JSON when the caller has it already), and with it the apply
   * state the watch plane reads, in one fenced write; false when the lease token is no longer the
   * owner's (nothing written). The shell saves before it carries out the step's actions, so an
   * attempt is never sent before its epoch is published.
   */
  async save(leaseToken: string | undefined, state: DecisionState, json?: string): Promise<boolean> {
    if (!leaseToken) return false;
    return save(
      this.redis,
      this.keys.lease,
      leaseToken,
      [this.keys.decisions, this.keys.applyState],
      [json ?? JSON.stringify(state), JSON.stringify(applyStateOf(state))],
    );
  }
}
