/**
 * Waits for the worker to publish an accepted write. The worker sets
 * `writePublishedKey(prefix, id)` to the commit SHA and publishes `{id, commit}` on
 * `publishedChannel(prefix)`; one subscriber connection per gateway serves every waiting request.
 */
import type { Redis } from "ioredis";
import { publishedChannel, writePublishedKey } from "../queue/keys.js";

export class PublicationWaiter {
  #subscriber: Redis | undefined;
  #subscribed: Promise<void> | undefined;
  #waiting = new Map<string, Set<(commit: string) => void>>();

  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    /** Opens the dedicated subscriber connection (first wait only). */
    private readonly connect: () => Redis,
  ) {}

  /** Subscribes (once); rejects when Redis does not answer, so a caller can refuse before accepting. */
  ready(): Promise<void> {
    if (!this.#subscribed) {
      const sub = this.connect();
      this.#subscriber = sub;
      sub.on("error", () => {});
      sub.on("message", (_channel: string, message: string) => this.#deliver(message));
      this.#subscribed = sub.subscribe(publishedChannel(this.prefix)).then(
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
    let parsed: { id?: unknown; commit?: unknown };
    try {
      parsed = JSON.parse(message) as typeof parsed;
    } catch {
      return;
    }
    if (typeof parsed.id !== "string" || typeof parsed.commit !== "string") return;
    for (const resolve of this.#waiting.get(parsed.id) ?? []) resolve(parsed.commit);
  }

  /**
   * Resolves with the commit that published write `id`, or undefined after `timeoutMs`. Call
   * `ready()` before accepting the write so no message can be missed; the key is read too, for a
   * publication that happened before the subscription.
   */
  async wait(id: string, timeoutMs: number): Promise<string | undefined> {
    await this.ready();
    return new Promise<string | undefined>((resolve) => {
      const set = this.#waiting.get(id) ?? new Set();
      this.#waiting.set(id, set);
      const finish = (commit: string | undefined) => {
        clearTimeout(timer);
        set.delete(finish);
        if (set.size === 0) this.#waiting.delete(id);
        resolve(commit);
      };
      const timer = setTimeout(() => finish(undefined), timeoutMs);
      set.add(finish);
      this.redis.get(writePublishedKey(this.prefix, id)).then(
        (commit) => {
          if (commit) finish(commit);
        },
        () => {},
      );
    });
  }

  close(): void {
    for (const set of this.#waiting.values()) for (const f of set) f("");
    this.#subscriber?.disconnect();
  }
}
