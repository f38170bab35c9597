/**
 * Waits for the worker to settle an accepted write. The worker sets
 * `writePublishedKey(prefix, id)` to the commit SHA and publishes `{id, commit}` on
 * `publishedChannel(prefix)`, or, for a write it refused, the key to `refused: <reason>` and
 * `{id, refused}`; one subscriber connection per gateway serves every waiting request.
 */
import type { Redis } from "ioredis";
import { publishedChannel, REFUSED_PREFIX, writePublishedKey } from "../queue/keys.js";

/** How a write was settled: published in a commit, or refused with a reason. */
export type Settled = { commit: string } | { refused: string };

function settledOf(value: string): Settled {
  return value.startsWith(REFUSED_PREFIX)
    ? { refused: value.slice(REFUSED_PREFIX.length) }
    : { commit: value };
}

export class PublicationWaiter {
  #subscriber: Redis | undefined;
  #subscribed: Promise<void> | undefined;
  #waiting = new Map<string, Set<(settled: Settled | undefined) => void>>();

  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    /** Opens the dedicated subscriber connection (first wait only), subscribed to `channel`. */
    private readonly connect: (
      channel: string,
      onMessage: (message: string) => void,
    ) => { connection: Redis; subscribed: Promise<unknown> },
  ) {}

  /** Subscribes (once); rejects when Redis does not answer, so a caller can refuse before accepting. */
  ready(): Promise<void> {
    if (!this.#subscribed) {
      const { connection: sub, subscribed } = this.connect(publishedChannel(this.prefix), (message) =>
        this.#deliver(message),
      );
      this.#subscriber = sub;
      this.#subscribed = subscribed.then(
        () => undefined,
        (err) => {
          this.#subscribed = undefined;
          this.#subscriber = undefined;
          sub.disconnect();
          throw err;
        },
      );
    }
    return this.#subscribed;
  }

  #deliver(message: string): void {
    let parsed: { id?: unknown; commit?: unknown; refused?: unknown };
    try {
      parsed = JSON.parse(message) as typeof parsed;
    } catch {
      return;
    }
    if (typeof parsed.id !== "string") return;
    const settled: Settled | undefined =
      typeof parsed.commit === "string"
        ? { commit: parsed.commit }
        : typeof parsed.refused === "string"
          ? { refused: parsed.refused }
          : undefined;
    if (!settled) return;
    for (const resolve of this.#waiting.get(parsed.id) ?? []) resolve(settled);
  }

  /**
   * Resolves with how write `id` was settled (its commit, or the reason it was refused), or
   * undefined after `timeoutMs`. Call `ready()` before accepting the write so no message can be
   * missed; the key is read too, for a settlement that happened before the subscription.
   */
  async wait(id: string, timeoutMs: number): Promise<Settled | undefined> {
    await this.ready();
    return new Promise<Settled | undefined>((resolve) => {
      const set = this.#waiting.get(id) ?? new Set();
      this.#waiting.set(id, set);
      const finish = (settled: Settled | undefined) => {
        clearTimeout(timer);
        set.delete(finish);
        if (set.size === 0) this.#waiting.delete(id);
        resolve(settled);
      };
      const timer = setTimeout(() => finish(undefined), timeoutMs);
      set.add(finish);
      this.redis.get(writePublishedKey(this.prefix, id)).then(
        (value) => {
          if (value) finish(settledOf(value));
        },
        () => {},
      );
    });
  }

  close(): void {
    for (const set of this.#waiting.values()) for (const f of set) f(undefined);
    this.#subscriber?.disconnect();
  }
}
