/**
 * Sends one request to an endpoint (the imperative shell of address.ts and outcome.ts): no
 * redirect is ever followed (Node's client does not follow them; a 3xx is an answer like any
 * other non-2xx), every resolved address is checked before the connection and the connection is
 * made to a checked one, the whole exchange is bounded by the claim's timeout, and only the
 * first bytes of the answer are read.
 */

import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import http from "node:http";
import https from "node:https";
import { isIP, type LookupFunction } from "node:net";
import { StatusReason } from "../../queue/crds/reasons.js";
import { refusedAddress, refusedUrl } from "./address.js";
import { MESSAGE_BYTES, type SendResult } from "./outcome.js";

export interface SendOptions {
  url: string;
  bytes: Buffer;
  headers: Record<string, string>;
  timeoutMs: number;
  insecure: boolean;
  /** The operator allows loopback, link-local and metadata addresses (the playground, tests). */
  allowInternal: boolean;
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

export async function sendRequest(o: SendOptions): Promise<SendResult> {
  const bad = refusedUrl(o.url, { insecure: o.insecure });
  if (bad) return { kind: "notSent", reason: StatusReason.URLRefused, message: bad };
  const u = new URL(o.url);
  const host = u.hostname.replace(/^\[|\]$/g, "");
  const resolve = o.resolve ?? systemResolve;
  let addresses: LookupAddress[];
  try {
    addresses = isIP(host) ? [{ address: host, family: isIP(host) }] : await resolve(host);
  } catch (err) {
    return {
      kind: "notSent",
      reason: StatusReason.ResolveFailed,
      message: `${host}: ${(err as Error).message}`,
    };
  }
  if (addresses.length === 0)
    return { kind: "notSent", reason: StatusReason.ResolveFailed, message: `${host} has no address` };
  if (!o.allowInternal) {
    for (const a of addresses) {
      const why = refusedAddress(a.address);
      if (why)
        return {
          kind: "notSent",
          reason: StatusReason.AddressRefused,
          message: `${host} resolves to ${why}`,
        };
    }
  }
  const chosen = addresses[0]!;
  // The connection goes to the address checked above, never to a second lookup's answer.
  const pinned: LookupFunction = (_h, opts, cb) => {
    if ((opts as { all?: boolean }).all) (cb as (e: null, a: LookupAddress[]) => void)(null, [chosen]);
    else cb(null, chosen.address, chosen.family);
  };
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
        const chunks: Buffer[] = [];
        let size = 0;
        const done = () =>
          finish({
            kind: "answered",
            status: res.statusCode ?? 0,
            body: Buffer.concat(chunks)
              .subarray(0, MESSAGE_BYTES * 2)
              .toString("utf8"),
          });
        res.on("data", (c: Buffer) => {
          if (size < MESSAGE_BYTES * 2) chunks.push(c);
          size += c.length;
          // The status is the answer: the first bytes are enough for the message.
          if (size >= MESSAGE_BYTES * 2) done();
        });
        res.on("end", done);
        res.on("error", done);
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
