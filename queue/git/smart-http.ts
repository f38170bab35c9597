/**
 * A small smart-HTTP client for the calls the branch worker makes: read branch tips (protocol v2
 * `ls-refs` naming just the branches asked for, or the v0 advertisement of every ref from a host
 * that does not speak v2), fetch a pack, and push a pack with a compare-and-swap ref update.
 * Written here rather than taken from isomorphic-git so that each call costs exactly one request,
 * carries its own deadline, and a push sends only the objects the worker knows it added.
 */

import { errorMessage } from "../errors.js";
import { credentialRefusal, originOf } from "./credentials.js";
import { DELIM, FLUSH, lineText, pktLine, readPktLines } from "./pktline.js";

export const ZERO_OID = "0".repeat(40);
/** Deadline of one Git network call. */
export const DEFAULT_CALL_TIMEOUT_MS = 120_000;

export interface RemoteAuth {
  username: string;
  password: string;
}

export interface Remote {
  /** Clone URL (https or, for local development, http). */
  url: string;
  /** The GitProvider's credentials: sent only to the origin of `url` (queue/git/credentials.ts). */
  auth?: RemoteAuth;
  /** The operator allows credentials over plain http (`--allow-http-credentials`). */
  allowHttpCredentials?: boolean;
  /** Deadline of each call in milliseconds. */
  timeoutMs?: number;
  /**
   * Ends every call made with this remote when it aborts (a publication cycle's deadline, the
   * worker stopping); its reason, an Error, names why.
   */
  signal?: AbortSignal;
}

export type RemoteErrorKind =
  | "unreachable"
  | "timeout"
  | "server"
  | "auth"
  | "notFound"
  | "refused"
  | "protocol";

/** A Git call that did not do its work. Every kind keeps the pending writes for the retry. */
export class GitRemoteError extends Error {
  override name = "GitRemoteError";
  constructor(
    readonly kind: RemoteErrorKind,
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

/**
 * The server refused the ref update because the branch is no longer where we said it was: the
 * ordinary outcome of concurrent writers. Answered by fetching and replaying, never by forcing.
 */
export class PushRejectedError extends Error {
  override name = "PushRejectedError";
  constructor(
    readonly ref: string,
    readonly reason: string,
  ) {
    super(`push of ${ref} rejected: ${reason}`);
  }
}

/** Narrow on purpose (seed 003): only a moved branch or its ref lock is contention. */
export function isContention(reason: string): boolean {
  return /failed to update ref|cannot lock ref|is at [0-9a-f]+ but expected|non-fast-forward|fetch first|stale info|failed to lock/i.test(
    reason,
  );
}

export interface Advertisement {
  refs: Map<string, string>;
  capabilities: Set<string>;
}

type Service = "git-upload-pack" | "git-receive-pack";

/**
 * The Authorization header for a call to `url`: the remote's credentials, only when `url` is on the
 * remote's own origin over https (http only as the operator allows). A call they may not go to is
 * not made: it fails before connecting.
 */
function authHeader(remote: Remote, url: string): Record<string, string> {
  if (!remote.auth) return {};
  const own = originOf(remote.url);
  const refused = credentialRefusal(url, own ? [own] : [], {
    allowHttp: remote.allowHttpCredentials === true,
  });
  if (refused) throw new GitRemoteError("auth", refused.message);
  const token = Buffer.from(`${remote.auth.username}:${remote.auth.password}`).toString("base64");
  return { authorization: `Basic ${token}` };
}

/** Redirects a call with credentials follows, each to the remote's own origin. */
const MAX_REDIRECTS = 5;

function endpoint(remote: Remote, path: string): string {
  return `${remote.url.replace(/\/+$/, "")}/${path}`;
}

/**
 * One request, with the remote's credentials when it has them. A redirect is followed by hand:
 * credentials go to the next location only when it passes the same check (the remote's own
 * origin), and a location elsewhere ends the call without a request to it.
 */
async function fetchGuarded(
  remote: Remote,
  url: string,
  init: RequestInit,
  signal: AbortSignal,
): Promise<Response> {
  if (!remote.auth) return fetch(url, { ...init, signal });
  let at = url;
  for (let hop = 0; ; hop++) {
    const headers = { ...(init.headers as Record<string, string>), ...authHeader(remote, at) };
    const res = await fetch(at, { ...init, headers, signal, redirect: "manual" });
    const location = res.headers.get("location");
    if (res.status < 300 || res.status > 399 || location === null) return res;
    await res.arrayBuffer().catch(() => undefined);
    const next = new URL(location, at).toString();
    // A POST is re-sent only where the status keeps the method (307, 308); Git hosts move GETs.
    if (hop >= MAX_REDIRECTS || (init.method === "POST" && res.status !== 307 && res.status !== 308))
      throw new GitRemoteError(
        "protocol",
        `${redact(at)} answered ${res.status} to ${redact(next)}: not followed`,
      );
    at = next;
  }
}

async function call(remote: Remote, url: string, init: RequestInit): Promise<Buffer> {
  const timeout = remote.timeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
  let res: Response;
  let body: ArrayBuffer;
  const outer = remote.signal;
  if (outer?.aborted) throw new GitRemoteError("timeout", `${redact(url)} not called: ${abortReason(outer)}`);
  // One controller for the call's own deadline and the caller's signal, both let go afterwards
  // (a long-lived caller's signal must not collect a listener per call).
  const ctl = new AbortController();
  let ownDeadline = false;
  const timer = setTimeout(() => {
    ownDeadline = true;
    ctl.abort();
  }, timeout);
  const onOuter = () => ctl.abort();
  outer?.addEventListener("abort", onOuter, { once: true });
  try {
    res = await fetchGuarded(remote, url, init, ctl.signal);
    body = await res.arrayBuffer();
  } catch (err) {
    if (err instanceof GitRemoteError) throw err;
    if (outer?.aborted && !ownDeadline)
      throw new GitRemoteError("timeout", `${redact(url)} abandoned: ${abortReason(outer)}`);
    const name = err instanceof Error ? err.name : undefined;
    if (ownDeadline || name === "TimeoutError" || name === "AbortError")
      throw new GitRemoteError("timeout", `no answer from ${redact(url)} within ${timeout} ms`);
    // fetch rejects with "fetch failed" and says why (a refused connection, a DNS miss) in its cause.
    const cause = err instanceof Error && err.cause !== undefined ? err.cause : err;
    throw new GitRemoteError("unreachable", `${redact(url)}: ${errorMessage(cause)}`);
  } finally {
    clearTimeout(timer);
    outer?.removeEventListener("abort", onOuter);
  }
  if (res.status === 401 || res.status === 403)
    throw new GitRemoteError("auth", `${redact(url)} answered ${res.status}`, res.status);
  if (res.status === 404) throw new GitRemoteError("notFound", `${redact(url)} answered 404`, 404);
  if (res.status >= 500)
    throw new GitRemoteError("server", `${redact(url)} answered ${res.status}`, res.status);
  if (res.status !== 200)
    throw new GitRemoteError("protocol", `${redact(url)} answered ${res.status}`, res.status);
  return Buffer.from(body);
}

/** One POST of `body` to a service's endpoint, with the service's request and result types. */
function post(
  remote: Remote,
  service: Service,
  body: Buffer,
  headers: Record<string, string> = {},
): Promise<Buffer> {
  return call(remote, endpoint(remote, service), {
    method: "POST",
    headers: {
      "content-type": `application/x-${service}-request`,
      accept: `application/x-${service}-result`,
      ...headers,
    },
    body,
  });
}

/** Why a caller's signal aborted: its reason's message (an Error), for the error a call answers. */
export function abortReason(signal: AbortSignal): string {
  const r = signal.reason as unknown;
  return r instanceof Error ? r.message : String(r ?? "aborted");
}

/** The URL without the credentials it may embed: what error messages and logs may carry. */
export function redact(url: string): string {
  try {
    const u = new URL(url);
    u.username = "";
    u.password = "";
    return u.toString();
  } catch {
    return url;
  }
}

/** One GET of `info/refs`: the branch tips the server holds right now. */
export async function advertise(
  remote: Remote,
  service: Service = "git-upload-pack",
): Promise<Advertisement> {
  const buf = await call(remote, endpoint(remote, `info/refs?service=${service}`), {
    method: "GET",
    headers: { accept: `application/x-${service}-advertisement` },
  });
  return parseAdvertisement(buf);
}

function parseAdvertisement(buf: Buffer): Advertisement {
  const { lines } = readPktLines(buf);
  const refs = new Map<string, string>();
  let capabilities = new Set<string>();
  let first = true;
  for (const line of lines) {
    if (!line) continue;
    const text = lineText(line);
    if (text.startsWith("# service=")) continue;
    let refPart = text;
    if (first) {
      const nul = text.indexOf("\0");
      if (nul >= 0) {
        capabilities = new Set(
          text
            .slice(nul + 1)
            .split(" ")
            .filter(Boolean),
        );
        refPart = text.slice(0, nul);
      }
      first = false;
    }
    const [oid, name] = refPart.split(" ");
    if (!oid || !name || name === "capabilities^{}") continue;
    refs.set(name, oid);
  }
  return { refs, capabilities };
}

/**
 * What `info/refs` answers a client asking for protocol v2: either the host speaks it (its
 * capabilities, no refs) or it ignores the ask and sends the v0 advertisement of every ref.
 */
export type RefsDiscovery = { version: 2; capabilities: Set<string> } | { version: 0; ad: Advertisement };

/** One GET of `info/refs` asking for protocol v2 (`Git-Protocol: version=2`), for upload-pack. */
export async function discoverRefs(remote: Remote): Promise<RefsDiscovery> {
  const buf = await call(remote, endpoint(remote, "info/refs?service=git-upload-pack"), {
    method: "GET",
    headers: {
      accept: "application/x-git-upload-pack-advertisement",
      "git-protocol": "version=2",
    },
  });
  const texts = readPktLines(buf)
    .lines.filter((l): l is Buffer => l !== null)
    .map(lineText)
    .filter((t) => !t.startsWith("# service="));
  if (texts[0] === "version 2") return { version: 2, capabilities: new Set(texts.slice(1)) };
  return { version: 0, ad: parseAdvertisement(buf) };
}

/** Whether a v2 capability list offers `ls-refs` (bare, or with its features: `ls-refs=unborn`). */
export function offersLsRefs(capabilities: Set<string>): boolean {
  for (const c of capabilities) if (c === "ls-refs" || c.startsWith("ls-refs=")) return true;
  return false;
}

/**
 * One protocol v2 `ls-refs` POST naming `prefixes` (`ref-prefix` arguments): the refs under them
 * the server holds right now. A prefix matches more than the ref it names (`refs/heads/b1` also
 * matches `refs/heads/b10`): read the exact names from the map. With `peel`, a ref naming an
 * annotated tag also gets the object it peels to under `<ref>^{}`, as the v0 advertisement
 * names it.
 */
export async function lsRefs(
  remote: Remote,
  prefixes: string[],
  opts: { peel?: boolean } = {},
): Promise<Map<string, string>> {
  const body = Buffer.concat([
    pktLine("command=ls-refs\n"),
    pktLine("agent=applygate\n"),
    DELIM,
    ...(opts.peel ? [pktLine("peel\n")] : []),
    ...[...new Set(prefixes)].map((p) => pktLine(`ref-prefix ${p}\n`)),
    FLUSH,
  ]);
  const buf = await post(remote, "git-upload-pack", body, { "git-protocol": "version=2" });
  let lines: Array<Buffer | null>;
  try {
    lines = readPktLines(buf).lines;
  } catch (err) {
    throw new GitRemoteError("protocol", `ls-refs: ${errorMessage(err)}`);
  }
  const refs = new Map<string, string>();
  let flushed = false;
  for (const line of lines) {
    if (line === null) {
      flushed = true;
      break;
    }
    const text = lineText(line);
    if (text.startsWith("ERR ")) throw new GitRemoteError("protocol", `ls-refs: ${text.slice(4)}`);
    const [oid, name, ...attributes] = text.split(" ");
    if (!oid || !name || !/^[0-9a-f]{40}$/.test(oid))
      throw new GitRemoteError("protocol", `ls-refs answered a line that names no ref: ${text.slice(0, 80)}`);
    refs.set(name, oid);
    const peeled = attributes.find((a) => a.startsWith("peeled:"))?.slice("peeled:".length);
    if (peeled !== undefined) {
      if (!/^[0-9a-f]{40}$/.test(peeled))
        throw new GitRemoteError("protocol", `ls-refs answered a bad peeled object: ${text.slice(0, 80)}`);
      refs.set(`${name}^{}`, peeled);
    }
  }
  // A list cut short is no proof a branch is absent: only one ended by its flush is read.
  if (!flushed) throw new GitRemoteError("protocol", "ls-refs answer ended before its flush");
  return refs;
}

/**
 * One upload-pack POST: asks for `wants` telling the server we hold `haves`, and returns the pack
 * (no side band, no thin pack, so the pack stands on its own).
 */
export async function uploadPack(remote: Remote, wants: string[], haves: string[]): Promise<Buffer> {
  const parts: Buffer[] = [];
  wants.forEach((oid, i) => {
    parts.push(pktLine(i === 0 ? `want ${oid} ofs-delta agent=applygate\n` : `want ${oid}\n`));
  });
  parts.push(FLUSH);
  for (const oid of haves) parts.push(pktLine(`have ${oid}\n`));
  parts.push(pktLine("done\n"));
  const buf = await post(remote, "git-upload-pack", Buffer.concat(parts));
  const { lines, rest } = readPktLines(buf, 0, true);
  for (const line of lines) {
    if (line && lineText(line).startsWith("ERR "))
      throw new GitRemoteError("protocol", `upload-pack: ${lineText(line).slice(4)}`);
  }
  const pack = buf.subarray(rest);
  if (pack.subarray(0, 4).toString("latin1") !== "PACK")
    throw new GitRemoteError("protocol", "upload-pack answered without a pack");
  return pack;
}

export interface RefUpdate {
  ref: string;
  /** Where we say the branch is now (ZERO_OID when it does not exist): the compare in compare-and-swap. */
  oldOid: string;
  newOid: string;
}

/**
 * One receive-pack POST: the ref update plus a pack of just the new objects. Resolves when the
 * server reports the ref updated; throws PushRejectedError when the compare failed.
 */
export async function receivePack(remote: Remote, update: RefUpdate, pack: Buffer): Promise<void> {
  const command = `${update.oldOid} ${update.newOid} ${update.ref}\0report-status agent=applygate\n`;
  const buf = await post(remote, "git-receive-pack", Buffer.concat([pktLine(command), FLUSH, pack]));
  const { lines } = readPktLines(buf);
  const texts = lines.filter((l): l is Buffer => l !== null).map(lineText);
  const unpack = texts.find((t) => t.startsWith("unpack "));
  if (!unpack) throw new GitRemoteError("protocol", `receive-pack gave no report: ${texts.join(" | ")}`);
  if (unpack !== "unpack ok") throw new GitRemoteError("protocol", `receive-pack: ${unpack}`);
  const status = texts.find((t) => t.startsWith(`ok ${update.ref}`) || t.startsWith(`ng ${update.ref}`));
  if (!status) throw new GitRemoteError("protocol", `receive-pack did not report ${update.ref}`);
  if (status.startsWith("ok ")) return;
  const reason = status.slice(`ng ${update.ref} `.length);
  if (isContention(reason)) throw new PushRejectedError(update.ref, reason);
  throw new GitRemoteError("refused", `push of ${update.ref} refused: ${reason}`);
}
