/**
 * The turns of one client's requests to the API server: at most `size` in flight, the others
 * waiting in arrival order. Past the pool's idle sockets every request opens a connection and
 * closes it after (Node's agent keeps 256 idle), so a burst wider than that churned: a replica
 * taking a thousand branches opened 6,198 connections for its 10,000 first status writes, a TLS
 * handshake each on a real cluster. Watches hold connections of their own and take no turn.
 *
 * A request the server never answers (a half-open connection; client-node sets no deadline) must
 * not keep its turn for ever, or 64 of them would stop every request of the process: past
 * `lapseMs` it no longer counts, while its caller still waits for its answer.
 */
import { Slots } from "../slots.js";

export const REQUESTS_IN_FLIGHT = 64;
/** Longer than any answer the API server gives in time, a list of thousands of objects included. */
export const REQUEST_TURN_LAPSE_MS = 30_000;

export class RequestTurns {
  private readonly slots: Slots;

  constructor(
    size = REQUESTS_IN_FLIGHT,
    private readonly lapseMs = REQUEST_TURN_LAPSE_MS,
  ) {
    this.slots = new Slots(size);
  }

  /** Runs `call` in its turn; its answer, or its failure, is the caller's. */
  async run<T>(call: () => Promise<T>): Promise<T> {
    const release = await this.slots.acquire();
    const lapse = setTimeout(release, this.lapseMs);
    lapse.unref();
    try {
      return await call();
    } finally {
      clearTimeout(lapse);
      release();
    }
  }

  /** Requests holding a turn and waiting for one. */
  get usage(): { held: number; waiting: number } {
    return this.slots.usage;
  }
}
