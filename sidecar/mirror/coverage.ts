/**
 * The mirror's coverage of its GitTargets: which collections (GitTarget, rule, kind) took their
 * first snapshot in this process, and, per GitTarget, the token of its last round of initial
 * snapshots, kept alive in Redis while a rule mirrors into it so the branch worker's barrier holds
 * the applier until the round's writes are published. It expires when the mirror is gone.
 */
import { randomUUID } from "node:crypto";
import type { Redis } from "ioredis";
import { errorMessage } from "../../queue/errors.js";
import { recollectChannel, WATCHED_TTL_MS, watchedTargetKey } from "../../queue/keys.js";
import type { Logger } from "../../queue/log.js";
import { connectSubscriber } from "../../queue/redis.js";
import { kindKey, type ResolvedKind } from "./rules.js";
import type { ResolvedTarget } from "./targets.js";

/** A GitTarget as the mirror's coverage knows it. */
export const coverageKey = (t: ResolvedTarget) => `${t.branchKey} ${t.namespace}/${t.name}`;

/** One collection: a rule's kind, for the GitTarget it writes to now. */
export const collectionKey = (target: ResolvedTarget | undefined, rule: string, kind: ResolvedKind) =>
  `${target ? coverageKey(target) : ""}|${rule}|${kindKey(kind)}`;

export class Coverage {
  /** This process: a coverage token is `<instance>:<round>`, so a restart starts new rounds. */
  readonly instance = randomUUID().slice(0, 8);
  private readonly collected = new Set<string>();
  /** The coverage token of each GitTarget covered, by coverageKey. */
  private readonly covered = new Map<string, { token: string; target: ResolvedTarget }>();
  private rounds = 0;

  constructor(private readonly o: { redis: Redis; redisPrefix: string; log: Logger }) {}

  /** Whether the collection took its first snapshot in this process; the first asks it taken. */
  firstSnapshot(collection: string): boolean {
    if (this.collected.has(collection)) return false;
    this.collected.add(collection);
    return true;
  }

  /** Whether any of the collections has not taken its first snapshot yet. */
  anyNew(collections: readonly string[]): boolean {
    return collections.some((c) => !this.collected.has(c));
  }

  /** Starts a round of initial snapshots for `target`: a new token, written to Redis. */
  async startRound(target: ResolvedTarget): Promise<string> {
    const token = `${this.instance}:${++this.rounds}`;
    this.covered.set(coverageKey(target), { token, target });
    await this.write(target, token);
    return token;
  }

  /** Keeps the coverage of every GitTarget still covered alive. */
  async refresh(): Promise<void> {
    for (const { token, target } of this.covered.values()) await this.write(target, token);
  }

  /** A GitTarget not in `live` (coverageKeys) is no longer covered: its coverage is left to expire. */
  forgetAllBut(live: ReadonlySet<string>): void {
    for (const key of [...this.covered.keys()]) if (!live.has(key)) this.covered.delete(key);
  }

  private async write(target: ResolvedTarget, token: string): Promise<void> {
    try {
      await this.o.redis.set(
        watchedTargetKey(this.o.redisPrefix, target.branchKey, target.namespace, target.name),
        token,
        "PX",
        WATCHED_TTL_MS,
      );
    } catch (err) {
      this.o.log.warn(
        {
          branch: target.branchKey,
          target: `${target.namespace}/${target.name}`,
          err: errorMessage(err),
        },
        "could not record the mirror's coverage of a GitTarget",
      );
    }
  }
}

/** A GitTarget whose snapshots its branch worker asks for again. */
export interface Recollection {
  branchKey?: string;
  namespace?: string;
  name?: string;
}

/**
 * Subscribes to the branch workers' asks for a GitTarget's snapshots again (Git is no longer
 * ahead, or the hold's bound passed). The connection is handed back at once, before the
 * subscription is answered, so a stop meanwhile can disconnect it; `subscribed` settles then.
 */
export function listenForRecollections(
  redisUrl: string,
  prefix: string,
  onAsk: (m: Recollection) => void,
  onResubscribeError: (err: unknown) => void = () => {},
): { connection: Redis; subscribed: Promise<unknown> } {
  return connectSubscriber(redisUrl, recollectChannel(prefix), {
    onMessage: (raw) => {
      let m: Recollection;
      try {
        m = JSON.parse(raw);
      } catch {
        return;
      }
      onAsk(m);
    },
    onError: onResubscribeError,
  });
}
