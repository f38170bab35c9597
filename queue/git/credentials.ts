/**
 * Where a GitProvider's credentials may be sent. A credential belongs to one GitProvider and goes
 * only to that provider's own origins: the scheme, host and port of its clone URL, of its
 * commit-status API root (the provider's own `spec.commitStatus.apiURL`, or the root derived from
 * its clone URL, which for github.com is api.github.com), and never over plain http unless the
 * operator allows it (`--allow-http-credentials`). Nothing a claim or a GitTarget says can add a
 * destination.
 *
 * Origins are compared as the WHATWG URL parser serialises them: host lower-cased, IPv4 and IPv6
 * in canonical form (`0x7f.1` is 127.0.0.1, `[0:0::1]` is [::1]), IDN in punycode, the default
 * port dropped. So every spelling of the provider's own origin is that origin, and anything else
 * (another port, another name of the same address such as `localhost` for 127.0.0.1, a trailing
 * dot) is another origin and is refused: the refusal errs on the side of not sending. Pure.
 */
import { StatusReason } from "../crds/reasons.js";

/** What the operator allows: plain http carries credentials only with `--allow-http-credentials`. */
export interface CredentialPolicy {
  allowHttp?: boolean;
}

/** Why a credential is not sent to a destination. */
export interface CredentialRefusal {
  reason: typeof StatusReason.InsecureTransport | typeof StatusReason.CredentialHostRefused;
  message: string;
}

/** The origin (`scheme://host[:port]`) of an http(s) URL, or undefined for anything else. */
export function originOf(url: string): string | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return undefined;
  }
  return u.protocol === "https:" || u.protocol === "http:" ? u.origin : undefined;
}

/** A URL without the userinfo it may embed, for messages. */
function shown(url: string): string {
  try {
    const u = new URL(url);
    u.username = "";
    u.password = "";
    return `${u.origin}${u.pathname}`;
  } catch {
    return "(not a URL)";
  }
}

/** GitHub's commit-status API lives on its own host: the one origin derived from another. */
const GITHUB_API = "https://api.github.com";

/** The endpoints of a GitProvider its credentials serve: its clone URL and its commit-status API. */
export interface ProviderEndpoints {
  url: string;
  commitStatus?: { apiURL?: string | undefined } | undefined;
}

/** The origins a GitProvider's credentials may go to (the provider's own; nothing else). */
export function providerOrigins(p: ProviderEndpoints): string[] {
  const out = new Set<string>();
  const own = originOf(p.url);
  if (own) {
    out.add(own);
    if (new URL(own).hostname === "github.com") out.add(GITHUB_API);
  }
  const api = p.commitStatus?.apiURL && originOf(p.commitStatus.apiURL);
  if (api) out.add(api);
  return [...out];
}

/**
 * Why a credential may not be sent to `destination`, or undefined when it may: the destination's
 * origin is one of `allowed`, and its scheme https (http only when the policy allows it).
 */
export function credentialRefusal(
  destination: string,
  allowed: readonly string[],
  policy: CredentialPolicy = {},
): CredentialRefusal | undefined {
  const origin = originOf(destination);
  if (!origin || !allowed.includes(origin))
    return {
      reason: StatusReason.CredentialHostRefused,
      message: `credentials are not sent to ${shown(destination)}: not the GitProvider's own host (${allowed.join(", ") || "none"})`,
    };
  if (origin.startsWith("http:") && !policy.allowHttp)
    return {
      reason: StatusReason.InsecureTransport,
      message: `credentials are not sent over plain http (${shown(destination)}): use https, or let the operator allow it (--allow-http-credentials)`,
    };
  return undefined;
}

/** The credential keys of a GitProvider's Secret: `password`, else `token`; `username` defaults to git. */
export function credentialsIn(
  data: Record<string, string> | undefined,
): { username: string; password: string } | undefined {
  const password = data?.password ?? data?.token;
  if (password === undefined || password === "") return undefined;
  return { username: data?.username || "git", password };
}
