/**
 * Signatures on Git objects, verified against trusted public keys (pure: bytes in, verdict out).
 *
 * A signed commit carries its signature in the `gpgsig` header; what was signed is the commit
 * object without that header (Git's `parse_signed_commit`). A signed annotated tag carries it at
 * the end of its message; what was signed is the tag object before it. Two formats are read:
 *
 * - **OpenPGP** (`-----BEGIN PGP SIGNATURE-----`, `git commit -S` with gpg): a detached signature
 *   over the payload, checked with openpgp.js against the armored public keys trusted.
 * - **SSH** (`-----BEGIN SSH SIGNATURE-----`, `gpg.format=ssh`): the SSHSIG format of OpenSSH's
 *   PROTOCOL.sshsig, namespace `git`, hash sha256 or sha512; the key inside must be one of the
 *   trusted keys (authorized_keys lines), and the signature is checked with node:crypto for
 *   ssh-ed25519, ecdsa-sha2-nistp256/384/521 and RSA (rsa-sha2-256/512; SHA-1 `ssh-rsa` is refused).
 *
 * X.509 signatures (gpgsm) and SSH certificates are not read: they are `SignatureUnsupported`.
 */
import { createHash, createPublicKey, verify as cryptoVerify, type KeyObject } from "node:crypto";
import * as openpgp from "openpgp";
import { StatusReason } from "../crds/reasons.js";
import { errorMessage } from "../errors.js";

/** Why a signature does not approve an object. */
export type SignatureProblem =
  | typeof StatusReason.CommitUnsigned
  | typeof StatusReason.SignatureUntrusted
  | typeof StatusReason.SignatureInvalid
  | typeof StatusReason.SignatureUnsupported
  | typeof StatusReason.NoTrustedKeys;

export type SignatureVerdict =
  | {
      ok: true;
      format: "openpgp" | "ssh";
      /** The signing key: `SHA256:<base64>` for SSH (as ssh-keygen -l prints), the OpenPGP fingerprint (hex). */
      key: string;
      /** The key's comment (SSH) or its primary user ID (OpenPGP), when it has one. */
      signer?: string;
    }
  | { ok: false; reason: SignatureProblem; message: string; key?: string };

/** An SSH public key trusted for signatures: its blob, type and fingerprint. */
export interface SshKey {
  type: string;
  blob: Buffer;
  fingerprint: string;
  comment?: string;
}

/** The keys a Secret holds, read once; `problems` says what could not be read. */
export interface TrustedKeys {
  ssh: SshKey[];
  openpgp: openpgp.PublicKey[];
  problems: string[];
}

/** The SSHSIG namespace Git signs with. */
export const GIT_SSH_NAMESPACE = "git";

const SSH_KEY_TYPES = new Set([
  "ssh-ed25519",
  "ssh-rsa",
  "ecdsa-sha2-nistp256",
  "ecdsa-sha2-nistp384",
  "ecdsa-sha2-nistp521",
]);

const PGP_KEY_BLOCK = /-----BEGIN PGP PUBLIC KEY BLOCK-----[\s\S]*?-----END PGP PUBLIC KEY BLOCK-----/g;

/** `SHA256:<unpadded base64>` of a key blob, as `ssh-keygen -l` prints it. */
export function sshFingerprint(blob: Buffer): string {
  return `SHA256:${createHash("sha256").update(blob).digest("base64").replace(/=+$/, "")}`;
}

/**
 * Reads trusted keys from texts (the values of a Secret): armored OpenPGP public key blocks, and
 * every other non-empty line that is not a comment as an authorized_keys line (`[options] type
 * base64 [comment]`). A line or block that cannot be read is a problem, never a key.
 */
export async function readTrustedKeys(texts: readonly string[]): Promise<TrustedKeys> {
  const out: TrustedKeys = { ssh: [], openpgp: [], problems: [] };
  for (const text of texts) {
    for (const block of text.match(PGP_KEY_BLOCK) ?? []) {
      try {
        out.openpgp.push(...(await openpgp.readKeys({ armoredKeys: block })));
      } catch (err) {
        out.problems.push(`an OpenPGP key block cannot be read: ${errorMessage(err)}`);
      }
    }
    for (const raw of text.replace(PGP_KEY_BLOCK, "").split(/\r?\n/)) {
      const line = raw.trim();
      if (line === "" || line.startsWith("#")) continue;
      const key = parseAuthorizedKey(line);
      if (typeof key === "string") out.problems.push(key);
      else out.ssh.push(key);
    }
  }
  return out;
}

/** One authorized_keys line, or why it is not a key. */
export function parseAuthorizedKey(line: string): SshKey | string {
  const fields = line.split(/\s+/);
  // Options come first and may hold quoted spaces; the key type is the first known type field.
  const at = fields.findIndex((f) => SSH_KEY_TYPES.has(f));
  if (at < 0) return `not an SSH public key of a supported type: ${JSON.stringify(line.slice(0, 40))}`;
  const type = fields[at] as string;
  const b64 = fields[at + 1] ?? "";
  const blob = Buffer.from(b64, "base64");
  if (blob.length === 0 || blob.toString("base64").replace(/=+$/, "") !== b64.replace(/=+$/, ""))
    return `an ${type} key whose base64 cannot be read`;
  try {
    const r = new Reader(blob);
    if (r.string().toString("latin1") !== type) return `an ${type} key whose blob names another type`;
    publicKeyOf(blob);
  } catch (err) {
    return `an ${type} key that cannot be read: ${errorMessage(err)}`;
  }
  const comment = fields.slice(at + 2).join(" ");
  return { type, blob, fingerprint: sshFingerprint(blob), ...(comment ? { comment } : {}) };
}

/** A commit object split into what was signed and the signature; `signature` absent when unsigned. */
export function splitSignedCommit(raw: Uint8Array): { payload: Buffer; signature?: string } {
  const buf = Buffer.from(raw);
  const end = buf.indexOf("\n\n");
  const headerEnd = end < 0 ? buf.length : end + 1;
  const kept: Buffer[] = [];
  const sig: string[] = [];
  let inSig = false;
  let pos = 0;
  while (pos < headerEnd) {
    const nl = buf.indexOf(10, pos);
    const next = nl < 0 || nl >= headerEnd ? headerEnd : nl + 1;
    const line = buf.subarray(pos, next);
    const text = line.toString("utf8").replace(/\n$/, "");
    if (text.startsWith("gpgsig ")) {
      inSig = true;
      sig.push(text.slice("gpgsig ".length));
    } else if (inSig && text.startsWith(" ")) {
      sig.push(text.slice(1));
    } else {
      inSig = false;
      kept.push(line);
    }
    pos = next;
  }
  kept.push(buf.subarray(headerEnd));
  const payload = Buffer.concat(kept);
  return sig.length > 0 ? { payload, signature: `${sig.join("\n")}\n` } : { payload };
}

const SIG_STARTS = [
  "-----BEGIN PGP SIGNATURE-----",
  "-----BEGIN SSH SIGNATURE-----",
  "-----BEGIN SIGNED MESSAGE-----",
];

/** An annotated tag object split into what was signed and the signature at the end of its message. */
export function splitSignedTag(raw: Uint8Array): { payload: Buffer; signature?: string } {
  const buf = Buffer.from(raw);
  let at = -1;
  for (const start of SIG_STARTS) {
    const i = buf.lastIndexOf(`\n${start}`);
    if (i > at) at = i;
  }
  if (at < 0) return { payload: buf };
  return { payload: buf.subarray(0, at + 1), signature: buf.subarray(at + 1).toString("utf8") };
}

/** Verifies a raw commit object's signature against `keys`. */
export function verifyCommit(raw: Uint8Array, keys: TrustedKeys): Promise<SignatureVerdict> {
  const { payload, signature } = splitSignedCommit(raw);
  if (signature === undefined)
    return Promise.resolve({
      ok: false,
      reason: StatusReason.CommitUnsigned,
      message: "the commit is not signed",
    });
  return verifyDetached(payload, signature, keys);
}

/** Verifies a raw annotated tag object's signature against `keys`. */
export function verifyTag(raw: Uint8Array, keys: TrustedKeys): Promise<SignatureVerdict> {
  const { payload, signature } = splitSignedTag(raw);
  if (signature === undefined)
    return Promise.resolve({
      ok: false,
      reason: StatusReason.CommitUnsigned,
      message: "the tag is not signed",
    });
  return verifyDetached(payload, signature, keys);
}

/** Verifies an armored detached signature (OpenPGP or SSHSIG) over `payload`. */
export async function verifyDetached(
  payload: Uint8Array,
  signature: string,
  keys: TrustedKeys,
): Promise<SignatureVerdict> {
  if (keys.ssh.length === 0 && keys.openpgp.length === 0)
    return {
      ok: false,
      reason: StatusReason.NoTrustedKeys,
      message: `no trusted key could be read${keys.problems.length > 0 ? `: ${keys.problems.join("; ")}` : ""}`,
    };
  const text = signature.trimStart();
  if (text.startsWith("-----BEGIN SSH SIGNATURE-----")) return verifySsh(payload, text, keys.ssh);
  if (text.startsWith("-----BEGIN PGP SIGNATURE-----")) return verifyOpenPgp(payload, text, keys.openpgp);
  return {
    ok: false,
    reason: StatusReason.SignatureUnsupported,
    message: `a signature of a format not read (${JSON.stringify(text.split("\n")[0]?.slice(0, 40) ?? "")}): only OpenPGP and SSH`,
  };
}

// ---------------------------------------------------------------------------------------------
// OpenPGP

async function verifyOpenPgp(
  payload: Uint8Array,
  armored: string,
  trusted: readonly openpgp.PublicKey[],
): Promise<SignatureVerdict> {
  let sig: openpgp.Signature;
  try {
    sig = await openpgp.readSignature({ armoredSignature: armored });
  } catch (err) {
    return {
      ok: false,
      reason: StatusReason.SignatureInvalid,
      message: `the OpenPGP signature cannot be read: ${errorMessage(err)}`,
    };
  }
  const issuers = sig.getSigningKeyIDs();
  const issuer = issuers[0]?.toHex() ?? "unknown";
  const signers = trusted.filter((k) => issuers.some((id) => k.getKeys(id).length > 0));
  if (signers.length === 0)
    return {
      ok: false,
      reason: StatusReason.SignatureUntrusted,
      message: `signed by OpenPGP key ${issuer.toUpperCase()}, which is not among the trusted keys`,
      key: issuer.toUpperCase(),
    };
  const signer = signers[0] as openpgp.PublicKey;
  const fingerprint = signer.getFingerprint().toUpperCase();
  try {
    const message = await openpgp.createMessage({ binary: payload });
    const { signatures } = await openpgp.verify({
      message,
      signature: sig,
      verificationKeys: signers,
      format: "binary",
      expectSigned: false,
    });
    const first = signatures[0];
    if (!first) throw new Error("no signature in the block");
    await first.verified;
  } catch (err) {
    return {
      ok: false,
      reason: StatusReason.SignatureInvalid,
      message: `the OpenPGP signature by ${fingerprint} does not verify: ${errorMessage(err)}`,
      key: fingerprint,
    };
  }
  let user: string | undefined;
  try {
    user = (await signer.getPrimaryUser()).user.userID?.userID;
  } catch {
    user = undefined;
  }
  return { ok: true, format: "openpgp", key: fingerprint, ...(user ? { signer: user } : {}) };
}

// ---------------------------------------------------------------------------------------------
// SSH (PROTOCOL.sshsig)

class Reader {
  private at = 0;
  constructor(private readonly b: Buffer) {}
  uint32(): number {
    if (this.at + 4 > this.b.length) throw new Error("truncated");
    const v = this.b.readUInt32BE(this.at);
    this.at += 4;
    return v;
  }
  bytes(n: number): Buffer {
    if (this.at + n > this.b.length) throw new Error("truncated");
    const v = this.b.subarray(this.at, this.at + n);
    this.at += n;
    return v;
  }
  string(): Buffer {
    return this.bytes(this.uint32());
  }
  done(): boolean {
    return this.at === this.b.length;
  }
}

function sshString(b: Buffer | string): Buffer {
  const body = typeof b === "string" ? Buffer.from(b, "utf8") : b;
  const len = Buffer.alloc(4);
  len.writeUInt32BE(body.length);
  return Buffer.concat([len, body]);
}

const b64url = (b: Buffer) => b.toString("base64url");
/** An SSH mpint as unsigned big-endian bytes (the sign byte dropped). */
const unsigned = (b: Buffer) => {
  let i = 0;
  while (i < b.length - 1 && b[i] === 0) i++;
  return b.subarray(i);
};

const CURVES: Record<string, { crv: string; size: number; hash: string }> = {
  nistp256: { crv: "P-256", size: 32, hash: "sha256" },
  nistp384: { crv: "P-384", size: 48, hash: "sha384" },
  nistp521: { crv: "P-521", size: 66, hash: "sha512" },
};

/** A node KeyObject from an SSH public key blob. */
function publicKeyOf(blob: Buffer): KeyObject {
  const r = new Reader(blob);
  const type = r.string().toString("latin1");
  if (type === "ssh-ed25519") {
    const x = r.string();
    if (x.length !== 32) throw new Error("an ed25519 key is 32 bytes");
    return createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: b64url(x) }, format: "jwk" });
  }
  if (type === "ssh-rsa") {
    const e = unsigned(r.string());
    const n = unsigned(r.string());
    return createPublicKey({ key: { kty: "RSA", n: b64url(n), e: b64url(e) }, format: "jwk" });
  }
  if (type.startsWith("ecdsa-sha2-")) {
    const curve = CURVES[r.string().toString("latin1")];
    const q = r.string();
    if (!curve || type !== `ecdsa-sha2-${Object.keys(CURVES).find((k) => CURVES[k] === curve)}`)
      throw new Error("an ECDSA key of an unknown curve");
    if (q.length !== 1 + 2 * curve.size || q[0] !== 4) throw new Error("an ECDSA point not uncompressed");
    const x = q.subarray(1, 1 + curve.size);
    const y = q.subarray(1 + curve.size);
    return createPublicKey({ key: { kty: "EC", crv: curve.crv, x: b64url(x), y: b64url(y) }, format: "jwk" });
  }
  throw new Error(`key type ${type} is not read`);
}

/** Checks a signature blob (`string format, string sig`) of `key` over `data`. */
function sshVerify(keyBlob: Buffer, sigBlob: Buffer, data: Buffer): boolean | string {
  const key = publicKeyOf(keyBlob);
  const keyType = new Reader(keyBlob).string().toString("latin1");
  const r = new Reader(sigBlob);
  const format = r.string().toString("latin1");
  const sig = r.string();
  if (keyType === "ssh-ed25519") {
    if (format !== "ssh-ed25519") return `an ${format} signature from an ed25519 key`;
    return cryptoVerify(null, data, key, sig);
  }
  if (keyType === "ssh-rsa") {
    const hash = format === "rsa-sha2-256" ? "sha256" : format === "rsa-sha2-512" ? "sha512" : undefined;
    if (!hash) return `RSA signature format ${format} is refused (only rsa-sha2-256 and rsa-sha2-512)`;
    return cryptoVerify(hash, data, key, sig);
  }
  if (format !== keyType) return `an ${format} signature from an ${keyType} key`;
  const curve = CURVES[keyType.slice("ecdsa-sha2-".length)] as { size: number; hash: string };
  const rs = new Reader(sig);
  const pad = (b: Buffer) => {
    const u = unsigned(b);
    if (u.length > curve.size) throw new Error("an ECDSA signature value too long");
    return Buffer.concat([Buffer.alloc(curve.size - u.length), u]);
  };
  const p1363 = Buffer.concat([pad(rs.string()), pad(rs.string())]);
  return cryptoVerify(curve.hash, data, { key, dsaEncoding: "ieee-p1363" }, p1363);
}

function verifySsh(payload: Uint8Array, armored: string, trusted: readonly SshKey[]): SignatureVerdict {
  const invalid = (message: string, key?: string): SignatureVerdict => ({
    ok: false,
    reason: StatusReason.SignatureInvalid,
    message,
    ...(key ? { key } : {}),
  });
  const m = /^-----BEGIN SSH SIGNATURE-----\r?\n([\s\S]*?)\r?\n-----END SSH SIGNATURE-----\s*$/.exec(armored);
  if (!m) return invalid("the SSH signature's armor cannot be read");
  const blob = Buffer.from((m[1] as string).replace(/\s+/g, ""), "base64");
  let fields: { publicKey: Buffer; namespace: string; reserved: Buffer; hash: string; signature: Buffer };
  try {
    const r = new Reader(blob);
    if (r.bytes(6).toString("latin1") !== "SSHSIG") return invalid("not an SSHSIG signature (magic)");
    const version = r.uint32();
    if (version !== 1) return invalid(`SSHSIG version ${version} is not read`);
    fields = {
      publicKey: r.string(),
      namespace: r.string().toString("utf8"),
      reserved: r.string(),
      hash: r.string().toString("latin1"),
      signature: r.string(),
    };
    if (!r.done()) return invalid("trailing bytes after the SSHSIG signature");
  } catch {
    return invalid("the SSHSIG signature is truncated");
  }
  let keyType: string;
  try {
    keyType = new Reader(fields.publicKey).string().toString("latin1");
  } catch {
    return invalid("the SSHSIG public key is truncated");
  }
  if (keyType.includes("-cert-v01@openssh.com"))
    return {
      ok: false,
      reason: StatusReason.SignatureUnsupported,
      message: "signed with an SSH certificate: certificates are not read, trust the key itself",
    };
  const fingerprint = sshFingerprint(fields.publicKey);
  if (fields.namespace !== GIT_SSH_NAMESPACE)
    return invalid(
      `the SSH signature is for namespace ${JSON.stringify(fields.namespace)}, not "git"`,
      fingerprint,
    );
  if (fields.hash !== "sha256" && fields.hash !== "sha512")
    return invalid(
      `SSHSIG hash algorithm ${JSON.stringify(fields.hash)} is refused (sha256, sha512)`,
      fingerprint,
    );
  const signer = trusted.find((k) => k.blob.equals(fields.publicKey));
  if (!signer)
    return {
      ok: false,
      reason: StatusReason.SignatureUntrusted,
      message: `signed by SSH key ${fingerprint} (${keyType}), which is not among the trusted keys`,
      key: fingerprint,
    };
  const signed = Buffer.concat([
    Buffer.from("SSHSIG", "latin1"),
    sshString(fields.namespace),
    sshString(fields.reserved),
    sshString(fields.hash),
    sshString(createHash(fields.hash).update(payload).digest()),
  ]);
  let good: boolean | string;
  try {
    good = sshVerify(fields.publicKey, fields.signature, signed);
  } catch (err) {
    return invalid(
      `the SSH signature by ${fingerprint} cannot be checked: ${errorMessage(err)}`,
      fingerprint,
    );
  }
  if (typeof good === "string") return invalid(`the SSH signature by ${fingerprint}: ${good}`, fingerprint);
  if (!good)
    return invalid(`the SSH signature by ${fingerprint} does not verify over the commit`, fingerprint);
  return { ok: true, format: "ssh", key: fingerprint, ...(signer.comment ? { signer: signer.comment } : {}) };
}
