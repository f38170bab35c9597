/**
 * Which endpoint addresses the webhook applier refuses to call (pure). A WebhookClaim is written
 * by a namespace's users, and the request is sent from inside the cluster: without this rule a
 * claim could make the sidecar post to the node's loopback, a link-local service or the cloud
 * provider's metadata endpoint (SSRF). The rule is applied to every address the name resolves
 * to, and the connection is made to the address that was checked (send.ts), so a name cannot
 * resolve to a good address for the check and a bad one for the connection.
 *
 * Addresses are compared as bytes (ipaddr.js), never as text: one address has many spellings
 * (`::ffff:127.0.0.1`, `::ffff:7f00:1`, `0:0:0:0:0:ffff:7f00:1`; `2130706433` or `0x7f.1` in a
 * URL, which the URL parser rewrites to `127.0.0.1`), and an IPv6 address may carry an IPv4
 * address that the host's stack, a translator or a relay delivers to. Each IPv4 address carried
 * is judged as the IPv4 address it is.
 */
import { isIP } from "node:net";
import ipaddr from "ipaddr.js";
import { StatusReason } from "../../queue/crds/reasons.js";

export interface AddressPolicy {
  /** `--webhook-allow-internal`: loopback, link-local and metadata addresses may be called. */
  allowInternal: boolean;
  /** `--webhook-refuse-private`: private ranges are refused too (allowed by default). */
  refusePrivate: boolean;
}

export const DEFAULT_POLICY: AddressPolicy = { allowInternal: false, refusePrivate: false };

export interface RefusedRange {
  cidr: string;
  why: string;
  /** internal: refused unless `--webhook-allow-internal`; private: only with `--webhook-refuse-private`. */
  group: "internal" | "private";
}

export const REFUSED_RANGES: readonly RefusedRange[] = [
  { cidr: "127.0.0.0/8", why: "loopback", group: "internal" },
  { cidr: "0.0.0.0/8", why: "this network", group: "internal" },
  { cidr: "169.254.0.0/16", why: "link-local (cloud metadata at 169.254.169.254)", group: "internal" },
  { cidr: "100.100.100.200/32", why: "cloud metadata (Alibaba Cloud)", group: "internal" },
  { cidr: "::1/128", why: "loopback", group: "internal" },
  { cidr: "::/128", why: "unspecified", group: "internal" },
  { cidr: "fe80::/10", why: "link-local", group: "internal" },
  { cidr: "fd00:ec2::254/128", why: "cloud metadata (AWS IPv6)", group: "internal" },
  // RFC 8215: where an address of this prefix carries its IPv4 address depends on the prefix
  // length the network chose (RFC 6052 allows six), so what it reaches cannot be judged.
  {
    cidr: "64:ff9b:1::/48",
    why: "local-use NAT64 (the IPv4 address it reaches is unknown)",
    group: "internal",
  },
  { cidr: "10.0.0.0/8", why: "private", group: "private" },
  { cidr: "172.16.0.0/12", why: "private", group: "private" },
  { cidr: "192.168.0.0/16", why: "private", group: "private" },
  { cidr: "100.64.0.0/10", why: "shared address space (private)", group: "private" },
  { cidr: "fc00::/7", why: "unique local (private)", group: "private" },
  { cidr: "fec0::/10", why: "site-local (private)", group: "private" },
];

const ranges = REFUSED_RANGES.map((r) => ({ ...r, net: ipaddr.parseCIDR(r.cidr) }));

/** IPv6 prefixes that carry an IPv4 address, and where (RFC 4291, 6145, 6052, 3056, 4380). */
const CARRIERS: readonly { net: [ipaddr.IPv6, number]; how: string; v4: (b: number[]) => number[][] }[] = [
  { net: ipaddr.IPv6.parseCIDR("::ffff:0:0/96"), how: "IPv4-mapped", v4: (b) => [b.slice(12)] },
  { net: ipaddr.IPv6.parseCIDR("::/96"), how: "IPv4-compatible", v4: (b) => [b.slice(12)] },
  { net: ipaddr.IPv6.parseCIDR("::ffff:0:0:0/96"), how: "IPv4-translated", v4: (b) => [b.slice(12)] },
  { net: ipaddr.IPv6.parseCIDR("64:ff9b::/96"), how: "NAT64", v4: (b) => [b.slice(12)] },
  { net: ipaddr.IPv6.parseCIDR("2002::/16"), how: "6to4", v4: (b) => [b.slice(2, 6)] },
  // Teredo: the server's address in clear, the client's inverted.
  {
    net: ipaddr.IPv6.parseCIDR("2001::/32"),
    how: "Teredo",
    v4: (b) => [b.slice(4, 8), b.slice(12).map((x) => x ^ 0xff)],
  },
];

/** The IPv4 addresses an IPv6 address carries, and how it carries each. */
export function carriedIPv4(a: ipaddr.IPv6): { address: ipaddr.IPv4; how: string }[] {
  const bytes = a.toByteArray();
  return CARRIERS.filter((c) => a.match(c.net)).flatMap((c) =>
    c.v4(bytes).map((v4) => ({ address: new ipaddr.IPv4(v4), how: c.how })),
  );
}

function applies(group: RefusedRange["group"], policy: AddressPolicy): boolean {
  return group === "internal" ? !policy.allowInternal : policy.refusePrivate;
}

function refusedIp(ip: ipaddr.IPv4 | ipaddr.IPv6, policy: AddressPolicy): string | undefined {
  for (const r of ranges)
    if (applies(r.group, policy) && r.net[0].kind() === ip.kind() && ip.match(r.net)) return r.why;
  if (ip.kind() === "ipv6")
    for (const c of carriedIPv4(ip as ipaddr.IPv6)) {
      const why = refusedIp(c.address, policy);
      if (why) return `${c.how} ${c.address.toString()}, ${why}`;
    }
  return undefined;
}

/**
 * Why `address` is refused, or undefined when it may be called. Only what Node itself connects to
 * as an address counts as one (`isIP`: dotted decimal, IPv6 text); anything else is refused.
 */
export function refusedAddress(address: string, policy: AddressPolicy = DEFAULT_POLICY): string | undefined {
  const a = address.replace(/^\[|\]$/g, "");
  if (isIP(a) === 0) return `${address} is not an IP address`;
  const why = refusedIp(ipaddr.parse(a), policy);
  return why ? `${address} is ${why}` : undefined;
}

export interface UrlRules {
  /** The claim's `insecure: true`: plain http allowed. */
  insecure: boolean;
}

/** Why `url` may not be called at all (before any lookup), or undefined. */
export function refusedUrl(url: string, rules: UrlRules): string | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return `${url} is not a URL`;
  }
  if (u.protocol !== "https:" && u.protocol !== "http:") return `${u.protocol} is not http or https`;
  if (u.protocol === "http:" && !rules.insecure) return "plain http needs insecure: true on the claim";
  if (u.username || u.password) return "credentials in the URL are not sent; use the signature";
  return undefined;
}

/** What the guard makes of a URL before any lookup. */
export type UrlTarget =
  | {
      kind: "refused";
      reason: typeof StatusReason.URLRefused | typeof StatusReason.AddressRefused;
      message: string;
    }
  /** The host is an address (after the URL parser's rewriting): it is connected to as checked. */
  | { kind: "address"; host: string; address: string }
  /** The host is a name: each address it resolves to is judged by `pickAddress`. */
  | { kind: "name"; host: string };

/**
 * The guard's judgement of a URL: its scheme and credentials, then its host as the WHATWG URL
 * parser leaves it (which is what Node's client connects to): an IPv4 host in any spelling the
 * parser accepts (decimal, octal, hex, fewer parts, percent-encoded, full-width digits) is dotted
 * decimal by then, an IPv6 host compressed and in brackets.
 */
export function judgeUrl(url: string, rules: UrlRules & AddressPolicy): UrlTarget {
  const bad = refusedUrl(url, rules);
  if (bad) return { kind: "refused", reason: StatusReason.URLRefused, message: bad };
  const host = new URL(url).hostname.replace(/^\[|\]$/g, "");
  if (isIP(host) === 0) return { kind: "name", host };
  const why = refusedAddress(host, rules);
  if (why) return { kind: "refused", reason: StatusReason.AddressRefused, message: why };
  return { kind: "address", host, address: host };
}

/**
 * The address a name's request goes to: the first one it resolved to, and only if none of its
 * addresses is refused (a name with a refused address is not trusted with a pick of the good one).
 */
export function pickAddress(
  host: string,
  addresses: readonly string[],
  policy: AddressPolicy,
):
  | { ok: true; address: string }
  | {
      ok: false;
      reason: typeof StatusReason.ResolveFailed | typeof StatusReason.AddressRefused;
      message: string;
    } {
  if (addresses.length === 0)
    return { ok: false, reason: StatusReason.ResolveFailed, message: `${host} has no address` };
  for (const a of addresses) {
    const why = refusedAddress(a, policy);
    if (why) return { ok: false, reason: StatusReason.AddressRefused, message: `${host} resolves to ${why}` };
  }
  return { ok: true, address: addresses[0]! };
}
