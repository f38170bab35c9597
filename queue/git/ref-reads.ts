/**
 * Reads of branch tips, and of the tags, for one repository, shared: every read asked while one
 * is on the wire waits for the next request, which names all of them at once. So a replica
 * taking a thousand branches of one repository sends a few requests, not a thousand, and a single
 * wake costs one small request. A read is always answered by a request sent after it was asked: a
 * tip is never older than the question (a push notice asks after the push).
 *
 * The request is protocol v2 `ls-refs` with one `ref-prefix` per branch asked (`refs/tags/`, with
 * `peel`, for the tags), so the answer names those refs only, not every ref of the repository.
 * Whether the host speaks v2 is learnt from one `info/refs` asking for it (`Git-Protocol:
 * version=2`); a host that ignores the ask answers the v0 advertisement of every ref, which then
 * serves the reads, and is asked again the next time. An `ls-refs` that fails other than by the
 * network forgets what was learnt.
 */
import {
  abortReason,
  discoverRefs,
  GitRemoteError,
  lsRefs,
  offersLsRefs,
  type Remote,
  type RemoteAuth,
  redact,
} from "./smart-http.js";

interface Waiter {
  /** The `ref-prefix` this read asks for. */
  prefix: string;
  /** Whether it needs annotated tags' peeled objects (`<ref>^{}`). */
  peel: boolean;
  remote: Remote;
  resolve(refs: Map<string, string>): void;
  reject(err: unknown): void;
}

interface Line {
  /** Reads waiting for the next request. */
  queued: Waiter[];
  /** The request on the wire, if any. */
  running: Promise<void> | undefined;
  /** The host answered `info/refs` with v2 capabilities offering `ls-refs`. */
  v2: boolean;
}

export interface RefReadStats {
  /** Requests sent (`info/refs` and `ls-refs`). */
  requests: number;
  /** Reads answered. */
  reads: number;
}

const authKey = (a: RemoteAuth | undefined) => (a ? `${a.username}\0${a.password}` : "");

export class RefReads {
  private readonly lines = new Map<string, Line>();
  readonly stats: RefReadStats = { requests: 0, reads: 0 };

  /** The tip of `refs/heads/<branch>` as the server holds it now, or undefined when absent. */
  async tip(remote: Remote, branch: string): Promise<string | undefined> {
    const ref = `refs/heads/${branch}`;
    return (await this.read(remote, ref, false)).get(ref);
  }

  /**
   * The tags the server holds now: each `refs/tags/<name>` and the object it names, and for an
   * annotated tag also `refs/tags/<name>^{}`, the object it peels to (as the v0 advertisement
   * names them).
   */
  async tags(remote: Remote): Promise<Map<string, string>> {
    const refs = await this.read(remote, "refs/tags/", true);
    return new Map([...refs].filter(([name]) => name.startsWith("refs/tags/")));
  }

  private read(remote: Remote, prefix: string, peel: boolean): Promise<Map<string, string>> {
    const outer = remote.signal;
    if (outer?.aborted)
      return Promise.reject(
        new GitRemoteError("timeout", `${redact(remote.url)} not called: ${abortReason(outer)}`),
      );
    const key = `${remote.url}\0${authKey(remote.auth)}\0${remote.allowHttpCredentials === true}`;
    let line = this.lines.get(key);
    if (!line) {
      line = { queued: [], running: undefined, v2: false };
      this.lines.set(key, line);
    }
    const l = line;
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        // This caller leaves; the shared request goes on for the others.
        const i = l.queued.indexOf(w);
        if (i >= 0) l.queued.splice(i, 1);
        w.reject(
          new GitRemoteError(
            "timeout",
            `${redact(remote.url)} abandoned: ${abortReason(outer as AbortSignal)}`,
          ),
        );
      };
      let settled = false;
      const w: Waiter = {
        prefix,
        peel,
        remote,
        resolve: (t) => {
          if (settled) return;
          settled = true;
          outer?.removeEventListener("abort", onAbort);
          resolve(t);
        },
        reject: (e) => {
          if (settled) return;
          settled = true;
          outer?.removeEventListener("abort", onAbort);
          reject(e);
        },
      };
      outer?.addEventListener("abort", onAbort, { once: true });
      l.queued.push(w);
      this.pump(key, l);
    });
  }

  private pump(key: string, line: Line): void {
    if (line.running || line.queued.length === 0) return;
    const batch = line.queued.splice(0);
    line.running = this.send(line, batch).finally(() => {
      line.running = undefined;
      if (line.queued.length > 0) this.pump(key, line);
      else if (!line.v2) this.lines.delete(key);
    });
  }

  private async send(line: Line, batch: Waiter[]): Promise<void> {
    // The first caller's settings carry the request (every read of one repository shares them);
    // its own signal does not: one caller leaving must not end the request for the others.
    const first = batch[0] as Waiter;
    const remote: Remote = {
      url: first.remote.url,
      ...(first.remote.auth ? { auth: first.remote.auth } : {}),
      ...(first.remote.allowHttpCredentials ? { allowHttpCredentials: true } : {}),
      ...(first.remote.timeoutMs !== undefined ? { timeoutMs: first.remote.timeoutMs } : {}),
    };
    const prefixes = batch.map((w) => w.prefix);
    const peel = batch.some((w) => w.peel);
    try {
      let refs: Map<string, string>;
      if (!line.v2) {
        this.stats.requests++;
        const found = await discoverRefs(remote);
        if (found.version === 0) refs = found.ad.refs;
        else if (offersLsRefs(found.capabilities)) {
          line.v2 = true;
          refs = await this.lsRefs(line, remote, prefixes, peel);
        } else
          throw new GitRemoteError("protocol", `${redact(remote.url)} speaks protocol v2 without ls-refs`);
      } else refs = await this.lsRefs(line, remote, prefixes, peel);
      this.stats.reads += batch.length;
      for (const w of batch) w.resolve(refs);
    } catch (err) {
      for (const w of batch) w.reject(err);
    }
  }

  private async lsRefs(
    line: Line,
    remote: Remote,
    prefixes: string[],
    peel: boolean,
  ): Promise<Map<string, string>> {
    this.stats.requests++;
    try {
      return await lsRefs(remote, prefixes, { peel });
    } catch (err) {
      // Not the network: the host may have stopped speaking v2 (an upgrade, another node behind
      // a balancer). The next read asks `info/refs` again.
      if (!(err instanceof GitRemoteError) || !["unreachable", "timeout"].includes(err.kind)) line.v2 = false;
      throw err;
    }
  }
}
