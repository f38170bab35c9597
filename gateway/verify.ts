/**
 * Signature checks for push webhooks, one per GitProvider type. Every check works on the raw body
 * bytes, compares in constant time, and does the same amount of hashing whether it succeeds or
 * not, so a miss does not tell which part was wrong.
 */
import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { Webhooks } from "@octokit/webhooks";
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

// One @octokit/webhooks verifier per secret; small, since secrets are few and rotate rarely.
const octokitBySecret = new Map<string, Webhooks>();
function octokit(secret: string): Webhooks {
  let w = octokitBySecret.get(secret);
  if (!w) {
    if (octokitBySecret.size > 1000) octokitBySecret.clear();
    w = new Webhooks({ secret });
    octokitBySecret.set(secret, w);
  }
  return w;
}

/**
 * GitHub's X-Hub-Signature-256, checked by @octokit/webhooks. It verifies a string, so the body is
 * handed over only when it is valid UTF-8 (then string and bytes hash alike); other bodies are
 * checked over the bytes directly.
 */
async function githubSha256Matches(secret: string, body: Buffer, signature: string | undefined) {
  const text = body.toString("utf8");
  if (signature?.startsWith("sha256=") && text.length > 0 && Buffer.byteLength(text) === body.length) {
    try {
      return await octokit(secret).verify(text, signature);
    } catch {
      return false;
    }
  }
  return prefixedHmacMatches(secret, body, signature, ["sha256"]);
}

async function verifyGithubHeaders(secret: string, body: Buffer, headers: Headers, allowSha1: boolean) {
  const sig256 = header(headers, "x-hub-signature-256");
  if (sig256 !== undefined || !allowSha1) return githubSha256Matches(secret, body, sig256);
  return prefixedHmacMatches(secret, body, header(headers, "x-hub-signature"), ["sha1"]);
}

/** Verifies a delivery for a provider of the given type. */
export async function verifyDelivery(input: VerifyInput): Promise<boolean> {
  const { type, secret, body, headers, allowSha1 } = input;
  switch (type) {
    case "github":
      return verifyGithubHeaders(secret, body, headers, allowSha1);
    case "gitea": {
      const own = header(headers, "x-gitea-signature") ?? header(headers, "x-gogs-signature");
      if (own !== undefined) return hexHmacMatches("sha256", secret, body, own);
      return verifyGithubHeaders(secret, body, headers, allowSha1);
    }
    case "gitlab": {
      // The body is not signed; hash it anyway so a GitLab path costs what an HMAC path costs.
      hmac("sha256", DUMMY_SECRET, body);
      const token = header(headers, "x-gitlab-token");
      return stringsEqual(token ?? "", secret) && token !== undefined;
    }
    case "generic-hmac":
      return prefixedHmacMatches(secret, body, header(headers, "x-signature"), ["sha1", "sha256", "sha512"]);
    default:
      hmac("sha256", DUMMY_SECRET, body);
      return false;
  }
}

/** The work an unknown path costs: the same check as a GitHub provider, against a dummy secret. */
export async function verifyUnknown(body: Buffer, headers: Headers): Promise<false> {
  await verifyGithubHeaders(DUMMY_SECRET, body, headers, false);
  return false;
}

/** The receiver path of a provider: `/hook/` + hex sha256(token + name + namespace). */
export function hookPath(token: string, name: string, namespace: string): string {
  return `/hook/${createHash("sha256")
    .update(token + name + namespace)
    .digest("hex")}`;
}
