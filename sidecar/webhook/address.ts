/**
 * Which endpoint addresses the webhook applier refuses to call (pure). A WebhookClaim is written
 * by a namespace's users, and the request is sent from inside the cluster: without this rule a
 * claim could make the sidecar post to the node's loopback, a link-local service or the cloud
 * provider's metadata endpoint (SSRF). The rule is applied to every address the name resolves
 * to, and the connection is made to the address that was checked, so a name cannot resolve to a
 * good address for the check and a bad one for the connection.
 */
import { BlockList, isIP } from "node:net";

/** Ranges refused unless the operator allows internal endpoints (`--webhook-allow-internal`). */
export const REFUSED_RANGES: readonly {
  net: string;
  prefix: number;
  family: "ipv4" | "ipv6";
  why: string;
}[] = [
  { net: "127.0.0.0", prefix: 8, family: "ipv4", why: "loopback" },
  { net: "169.254.0.0", prefix: 16, family: "ipv4", why: "link-local (cloud metadata at 169.254.169.254)" },
  { net: "100.100.100.200", prefix: 32, family: "ipv4", why: "cloud metadata (Alibaba Cloud)" },
  { net: "0.0.0.0", prefix: 8, family: "ipv4", why: "this network" },
  { net: "::1", prefix: 128, family: "ipv6", why: "loopback" },
  { net: "::", prefix: 128, family: "ipv6", why: "unspecified" },
  { net: "fe80::", prefix: 10, family: "ipv6", why: "link-local" },
  { net: "fd00:ec2::254", prefix: 128, family: "ipv6", why: "cloud metadata (AWS IPv6)" },
];

const blocks = REFUSED_RANGES.map((r) => {
  const b = new BlockList();
  b.addSubnet(r.net, r.prefix, r.family);
  return { ...r, list: b };
});

/** An IPv4 address written as IPv6 (`::ffff:127.0.0.1`) is judged as the IPv4 address it is. */
function unmapped(address: string): { address: string; family: "ipv4" | "ipv6" } | undefined {
  const v = isIP(address);
  if (v === 4) return { address, family: "ipv4" };
  if (v !== 6) return undefined;
  const m = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (m) return { address: m[1]!, family: "ipv4" };
  return { address, family: "ipv6" };
}

/** Why `address` is refused, or undefined when it may be called. Not an IP address: refused. */
export function refusedAddress(address: string): string | undefined {
  const a = unmapped(address.replace(/^\[|\]$/g, ""));
  if (!a) return `${address} is not an IP address`;
  for (const b of blocks)
    if (b.family === a.family && b.list.check(a.address, a.family)) return `${address} is ${b.why}`;
  return undefined;
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
