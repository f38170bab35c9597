/** Fault injection: added latency, scripted failures for matching requests, dropped watches. */

export interface FailSpec {
  method?: string;
  pathPrefix?: string;
  status: number;
  /** Status reason; defaults from the code (500 InternalError, 409 Conflict, 429 TooManyRequests…). */
  reason?: string;
  message?: string;
}

interface PendingFailure extends FailSpec {
  remaining: number;
}

export class Faults {
  private latencyMs = 0;
  private latencyScope: { method?: string; pathPrefix?: string } = {};
  private failures: PendingFailure[] = [];
  private readonly watchDroppers = new Set<(path: string, abrupt: boolean) => boolean>();

  /** Delays every request (or only those matching method/pathPrefix) by `ms`. */
  latency(ms: number, scope: { method?: string; pathPrefix?: string } = {}): void {
    this.latencyMs = ms;
    this.latencyScope = scope;
  }

  latencyFor(method: string, path: string): number {
    const s = this.latencyScope;
    if ((s.method && s.method !== method) || (s.pathPrefix && !path.startsWith(s.pathPrefix))) return 0;
    return this.latencyMs;
  }

  /** The next `n` requests that match fail with the given status. */
  failNext(n: number, spec: FailSpec): void {
    this.failures.push({ ...spec, remaining: n });
  }

  /**
   * Ends every open watch whose path starts with the prefix (all without one): cleanly by default,
   * or by breaking the connection (`abrupt`), which client-node 1.4's informer reports as an error.
   */
  dropWatches(pathPrefix = "", abrupt = false): number {
    let dropped = 0;
    for (const drop of [...this.watchDroppers]) if (drop(pathPrefix, abrupt)) dropped++;
    return dropped;
  }

  /** Scripted failures not yet taken, of those for paths under `pathPrefix` (all without one). */
  pending(pathPrefix = ""): number {
    return this.failures
      .filter((x) => (x.pathPrefix ?? "").startsWith(pathPrefix))
      .reduce((n, x) => n + x.remaining, 0);
  }

  /** Takes one scripted failure for this request, if any matches. */
  take(method: string, path: string): FailSpec | undefined {
    const f = this.failures.find(
      (x) =>
        x.remaining > 0 &&
        (!x.method || x.method === method) &&
        (!x.pathPrefix || path.startsWith(x.pathPrefix)),
    );
    if (!f) return undefined;
    f.remaining--;
    this.failures = this.failures.filter((x) => x.remaining > 0);
    return f;
  }

  /** A watch registers a function that closes it when its path matches; returns the unregister. */
  registerWatch(drop: (prefix: string, abrupt: boolean) => boolean): () => void {
    this.watchDroppers.add(drop);
    return () => this.watchDroppers.delete(drop);
  }

  reset(): void {
    this.latencyMs = 0;
    this.latencyScope = {};
    this.failures = [];
  }
}

export function reasonFor(status: number): string {
  switch (status) {
    case 409:
      return "Conflict";
    case 429:
      return "TooManyRequests";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    case 404:
      return "NotFound";
    case 403:
      return "Forbidden";
    default:
      return "InternalError";
  }
}
