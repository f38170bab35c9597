/**
 * Sends one request to an endpoint (the imperative shell of address.ts and outcome.ts): no
 * redirect is ever followed (Node's client does not follow them; a 3xx is an answer like any
 * other non-2xx), every resolved address is checked before the connection and the connection is
 * made to a checked one, the whole exchange is bounded by the claim's timeout, and only the
 * status of the answer is kept: its body is never read into anything a claim's readers see.
 */

import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import http from "node:http";
import https from "node:https";
import { isIP, type LookupFunction } from "node:net";
import { StatusReason } from "../../queue/crds/reasons.js";
import { errorMessage } from "../../queue/errors.js";
import { judgeUrl, pickAddress } from "./address.js";
import type { SendResult } from "./outcome.js";

export interface SendOptions {
  url: string;
  bytes: Buffer;
  headers: Record<string, string>;
  timeoutMs: number;
  insecure: boolean;
  /** The operator allows loopback, link-local and metadata addresses (the playground, tests). */
  allowInternal: boolean;
  /** The operator refuses private ranges too (`--webhook-refuse-private`). */
  refusePrivate?: boolean;
  /** Extra CA certificates for https (tests). */
  ca?: string | Buffer;
  signal?: AbortSignal;
  /** Name resolution (tests resolve names to chosen addresses). */
  resolve?: (host: string) => Promise<LookupAddress[]>;
}

const systemResolve = (host: string) =>
  new Promise<LookupAddress[]>((res, rej) =>
    dnsLookup(host, { all: true }, (err, addresses) => (err ? rej(err) : res(addresses))),
  );

/**
 * The socket's name lookup, answering every question with the address that was checked: the
 * connection can go nowhere else, whatever the name resolves to by then (DNS rebinding).
 */
export function pinnedLookup(chosen: LookupAddress): LookupFunction {
  return (_host, opts, cb) => {
    if ((opts as { all?: boolean }).all) (cb as (e: null, a: LookupAddress[]) => void)(null, [chosen]);
    else cb(null, chosen.address, chosen.family);
  };
}

export async function sendRequest(o: SendOptions): Promise<SendResult> {
  const policy = { allowInternal: o.allowInternal, refusePrivate: o.refusePrivate === true };
  const target = judgeUrl(o.url, { insecure: o.insecure, ...policy });
  if (target.kind === "refused")
    return { kind: "notSent", reason: StatusReason[target.reason], message: target.message };
  const u = new URL(o.url);
  const host = target.host;
  let chosen: LookupAddress;
  if (target.kind === "address") chosen = { address: target.address, family: isIP(target.address) };
  else {
    let addresses: LookupAddress[];
    try {
      addresses = await (o.resolve ?? systemResolve)(host);
    } catch (err) {
      return {
        kind: "notSent",
        reason: StatusReason.ResolveFailed,
        message: `${host}: ${errorMessage(err)}`,
      };
    }
    const pick = pickAddress(
      host,
      addresses.map((a) => a.address),
      policy,
    );
    if (!pick.ok) return { kind: "notSent", reason: StatusReason[pick.reason], message: pick.message };
    chosen = { address: pick.address, family: isIP(pick.address) };
  }
  // The connection goes to the address checked above, never to a second lookup's answer.
  const pinned = pinnedLookup(chosen);
  const lib = u.protocol === "https:" ? https : http;
  return new Promise<SendResult>((resolveResult) => {
    let connected = false;
    let settled = false;
    const finish = (r: SendResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      o.signal?.removeEventListener("abort", onAbort);
      req.destroy();
      resolveResult(r);
    };
    const req = lib.request(
      u,
      {
        method: "POST",
        headers: { ...o.headers, "content-length": String(o.bytes.length) },
        lookup: pinned,
        agent: false,
        ...(o.ca ? { ca: o.ca } : {}),
        // TLS checks the name in the URL, not the address connected to.
        ...(u.protocol === "https:" ? { servername: isIP(host) ? undefined : host } : {}),
      },
      (res) => {
        // The status is the answer. The body is not read: whatever answers (a service the claim
        // pointed at) must not have its content copied where the claim's readers see it.
        res.on("error", () => {});
        finish({ kind: "answered", status: res.statusCode ?? 0 });
      },
    );
    req.on("socket", (s) => {
      const mark = () => {
        connected = true;
      };
      if (u.protocol === "https:") s.once("secureConnect", mark);
      else s.once("connect", mark);
    });
    req.on("error", (err) => {
      if (connected) finish({ kind: "lost", message: err.message });
      else
        finish({ kind: "notSent", reason: StatusReason.ConnectFailed, message: `${u.host}: ${err.message}` });
    });
    const timer = setTimeout(() => {
      if (connected) finish({ kind: "timeout" });
      else
        finish({
          kind: "notSent",
          reason: StatusReason.ConnectTimeout,
          message: `${u.host}: no connection within ${o.timeoutMs} ms`,
        });
    }, o.timeoutMs);
    const onAbort = () =>
      finish({
        kind: connected ? "lost" : "notSent",
        reason: StatusReason.SidecarStopping,
        message: "the sidecar stopped",
      } as SendResult);
    o.signal?.addEventListener("abort", onAbort, { once: true });
    req.end(o.bytes);
  });
}
