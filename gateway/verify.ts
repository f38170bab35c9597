/**
 * Signature checks for push webhooks, one per GitProvider type. Every check works on the raw body
 * bytes, compares in constant time, and does the same amount of hashing whether it succeeds or
 * not, so a miss does not tell which part was wrong. A `sha256=<hex>` signature (GitHub's
 * X-Hub-Signature-256, Gitea's bare hex in that form, a generic sha256 one) is verified by
 * @octokit/webhooks-methods; the legacy and other algorithms by HMACs of our own.
 */
import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { verify as verifySha256 } from "@octokit/webhooks-methods";
import type { GitProviderType } from "../queue/crds/index.js";

export type Headers = Record<string, string | string[] | undefined>;

export interface VerifyInput {
  type: GitProviderType;
  secret: string;
  allowSha1: boolean;
  body: Buffer;
  headers: Headers;
}

/** A secret nobody holds, checked against on unknown paths so they cost what a known path costs. */
export const DUMMY_SECRET = "applygate-unknown-receiver-d2f1c0a4e7b94c1f8a5e3b6d9c0e1f2a";

export function header(headers: Headers, name: string): string | undefined {
  const v = headers[name.toLowerCase()];
  return Array.isArray(v) ? v[0] : v;
}

const HMAC_ALGOS = { sha1: "sha1", sha256: "sha256", sha512: "sha512" } as const;
type HmacAlgo = keyof typeof HMAC_ALGOS;

/** Constant-time equality of two byte strings of possibly different lengths. */
export function bytesEqual(a: Buffer, b: Buffer): boolean {
  if (a.length !== b.length) {
    timingSafeEqual(a, a);
    return false;
  }
  return timingSafeEqual(a, b);
}

/** Constant-time equality of two strings, hashed first so their lengths do not leak. */
export function stringsEqual(a: string, b: string): boolean {
  const ha = createHash("sha256").update(a).digest();
  const hb = createHash("sha256").update(b).digest();
  return timingSafeEqual(ha, hb) && a.length === b.length;
}

function hmac(algo: HmacAlgo, secret: string, body: Buffer): Buffer {
  return createHmac(HMAC_ALGOS[algo], secret).update(body).digest();
}

const HEX = /^[0-9a-fA-F]*$/;

/** Checks a bare hex digest against HMAC-<algo>(secret, body). Always computes the HMAC. */
export function hexHmacMatches(
  algo: HmacAlgo,
  secret: string,
  body: Buffer,
  hex: string | undefined,
): boolean {
  const expected = hmac(algo, secret, body);
  const given = hex !== undefined && HEX.test(hex) && hex.length % 2 === 0 ? Buffer.from(hex, "hex") : null;
  return bytesEqual(given ?? Buffer.alloc(0), expected) && given !== null;
}

/** Checks `<algo>=<hex>` (GitHub's and Flux generic-hmac's format) over the raw body. */
export function prefixedHmacMatches(
  secret: string,
  body: Buffer,
  signature: string | undefined,
  allowed: readonly HmacAlgo[],
): boolean {
  const eq = signature?.indexOf("=") ?? -1;
  const algo = (eq > 0 ? signature!.slice(0, eq).toLowerCase() : "") as HmacAlgo;
  const known = (allowed as readonly string[]).includes(algo);
  return hexHmacMatches(known ? algo : "sha256", secret, body, signature?.slice(eq + 1)) && known;
}

/**
 * The one HMAC a delivery costs, whichever path it reaches: its algorithm is chosen from the
 * headers alone (never from the provider), so a real receiver path and an unknown one do the same
 * work over the same bytes, and only the key differs.
 */
export function signatureAlgo(headers: Headers): HmacAlgo {
  if (
    header(headers, "x-hub-signature-256") !== undefined ||
    header(headers, "x-gitea-signature") !== undefined ||
    header(headers, "x-gogs-signature") !== undefined
  )
    return "sha256";
  const generic = header(headers, "x-signature");
  if (generic !== undefined) {
    const algo = generic.slice(0, Math.max(0, generic.indexOf("="))).toLowerCase();
    return algo in HMAC_ALGOS ? (algo as HmacAlgo) : "sha256";
  }
  if (header(headers, "x-hub-signature") !== undefined) return "sha1";
  return "sha256";
}

/** Does `given` (`<algo>=<hex>`, or bare hex when `prefixed` is false) carry `digest`, made with `expected`? */
function carries(
  digest: Buffer,
  used: HmacAlgo,
  expected: HmacAlgo,
  given: string | undefined,
  prefixed: boolean,
): boolean {
  let hex = given;
  let algoOk = used === expected;
  if (prefixed) {
    const eq = given?.indexOf("=") ?? -1;
    algoOk = algoOk && eq > 0 && given!.slice(0, eq).toLowerCase() === expected;
    hex = eq > 0 ? given!.slice(eq + 1) : undefined;
  }
  const bytes = hex !== undefined && HEX.test(hex) && hex.length % 2 === 0 ? Buffer.from(hex, "hex") : null;
  return bytesEqual(bytes ?? Buffer.alloc(0), digest) && bytes !== null && algoOk;
}

function githubCarries(digest: Buffer, used: HmacAlgo, headers: Headers, allowSha1: boolean): boolean {
  const sig256 = header(headers, "x-hub-signature-256");
  if (sig256 !== undefined || !allowSha1) return carries(digest, used, "sha256", sig256, true);
  return carries(digest, used, "sha1", header(headers, "x-hub-signature"), true);
}

/** Stands in for a signature the delivery lacks: verified (one HMAC all the same), it never matches. */
const NO_SIGNATURE = "sha256=";

/**
 * The `sha256=<hex>` signature a provider of this type is verified by, read from the headers; null
 * when the type verifies otherwise (GitLab's token) or the delivery carries none of its headers.
 */
function sha256Signature(type: GitProviderType, headers: Headers): string | null {
  switch (type) {
    case "github":
      return header(headers, "x-hub-signature-256")?.toLowerCase() ?? null;
    case "gitea": {
      const own = header(headers, "x-gitea-signature") ?? header(headers, "x-gogs-signature");
      if (own !== undefined) return HEX.test(own) ? `sha256=${own.toLowerCase()}` : NO_SIGNATURE;
      return header(headers, "x-hub-signature-256")?.toLowerCase() ?? null;
    }
    case "generic-hmac": {
      const sig = header(headers, "x-signature");
      return sig?.toLowerCase().startsWith("sha256=") ? sig.toLowerCase() : null;
    }
    default:
      return null;
  }
}

/**
 * Verifies a delivery for a provider of the given type: one HMAC over the raw body (the algorithm
 * from `signatureAlgo`, the headers alone), then constant-time comparisons against the headers the
 * type reads. A sha256 delivery's one HMAC is @octokit/webhooks-methods' `verify`, over the body as the
 * UTF-8 text it is (the receiver lets only valid UTF-8 through).
 */
export async function verifyDelivery(input: VerifyInput): Promise<boolean> {
  const { type, secret, body, headers, allowSha1 } = input;
  const used = signatureAlgo(headers);
  // Computed on every path, so a GitLab provider's token check costs what it costs elsewhere.
  const token = header(headers, "x-gitlab-token");
  const tokenOk = stringsEqual(token ?? "", secret) && token !== undefined;
  if (used === "sha256") {
    const signature = sha256Signature(type, headers);
    // The function itself, not a Webhooks built per delivery: that costs as much again as the HMAC.
    const matches = await verifySha256(secret, body.toString("utf8"), signature ?? NO_SIGNATURE);
    return type === "gitlab" ? tokenOk : matches && signature !== null;
  }
  const digest = hmac(used, secret, body);
  switch (type) {
    case "github":
      return githubCarries(digest, used, headers, allowSha1);
    case "gitea": {
      const own = header(headers, "x-gitea-signature") ?? header(headers, "x-gogs-signature");
      if (own !== undefined) return carries(digest, used, "sha256", own, false);
      return githubCarries(digest, used, headers, allowSha1);
    }
    case "gitlab":
      return tokenOk;
    case "generic-hmac": {
      const sig = header(headers, "x-signature");
      const eq = sig?.indexOf("=") ?? -1;
      const algo = (eq > 0 ? sig!.slice(0, eq).toLowerCase() : "sha256") as HmacAlgo;
      return algo in HMAC_ALGOS && carries(digest, used, algo, sig, true);
    }
    default:
      return false;
  }
}

/**
 * The work an unknown path costs: exactly what a known one costs (the same HMAC over the same
 * bytes, the same comparisons), against a dummy secret.
 */
export async function verifyUnknown(body: Buffer, headers: Headers): Promise<false> {
  await verifyDelivery({ type: "github", secret: DUMMY_SECRET, allowSha1: false, body, headers });
  return false;
}

/** The receiver path of a provider: `/hook/` + hex sha256(token + name + namespace). */
export function hookPath(token: string, name: string, namespace: string): string {
  return `/hook/${createHash("sha256")
    .update(token + name + namespace)
    .digest("hex")}`;
}
