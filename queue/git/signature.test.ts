import { execFileSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as openpgp from "openpgp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  commitFile,
  type GpgSigner,
  gitWith,
  gpgAgentsOf,
  gpgKey,
  hasGpg,
  rawCommit,
  type SshSigner,
  sshKey,
  sshSign,
  stopGpgAgents,
  withSignature,
  workRepo,
} from "../../test/support/signing.js";
import { StatusReason } from "../crds/reasons.js";
import {
  parseAuthorizedKey,
  readTrustedKeys,
  splitSignedCommit,
  splitSignedTag,
  verifyCommit,
  verifyDetached,
  verifyTag,
} from "./signature.js";

const keysDir = mkdtempSync(join(tmpdir(), "sig-keys-"));
const tamper = (raw: Buffer) => Buffer.from(raw.toString("latin1").replace("change ", "chAnge "), "latin1");

describe("splitSignedCommit", () => {
  it("takes the gpgsig header and its continuation lines out, byte for byte", () => {
    const raw = Buffer.from(
      "tree abc\nparent def\nauthor A <a@b> 1 +0000\ncommitter A <a@b> 1 +0000\ngpgsig -----BEGIN X-----\n \n line\n -----END X-----\nmergetag x\n\nmessage\n\n body\n",
    );
    const { payload, signature } = splitSignedCommit(raw);
    expect(payload.toString()).toBe(
      "tree abc\nparent def\nauthor A <a@b> 1 +0000\ncommitter A <a@b> 1 +0000\nmergetag x\n\nmessage\n\n body\n",
    );
    expect(signature).toBe("-----BEGIN X-----\n\nline\n-----END X-----\n");
  });

  it("leaves an unsigned commit whole, and a message line starting 'gpgsig' alone", () => {
    const raw = Buffer.from("tree abc\nauthor A <a@b> 1 +0000\n\ngpgsig in the message\n");
    expect(splitSignedCommit(raw)).toEqual({ payload: raw });
  });
});

describe("parseAuthorizedKey", () => {
  it("reads a key with options in front and a comment behind", () => {
    const k = sshKey(keysDir, "ed25519", "ada laptop");
    const parsed = parseAuthorizedKey(`namespaces="git" ${k.publicKey}`);
    expect(parsed).toMatchObject({ type: "ssh-ed25519", comment: "ada laptop" });
    const fp = execFileSync("ssh-keygen", ["-l", "-f", `${k.keyPath}.pub`])
      .toString()
      .split(" ")[1];
    expect((parsed as { fingerprint: string }).fingerprint).toBe(fp);
  });

  it("says why a line is not a key", () => {
    expect(parseAuthorizedKey("hello world")).toMatch(/not an SSH public key/);
    expect(parseAuthorizedKey("ssh-ed25519 !!!! x")).toMatch(/base64/);
    expect(parseAuthorizedKey("ssh-ed25519 AAAAB3NzaC1yc2EAAAADAQABAAABAQ==")).toMatch(
      /another type|cannot be read/,
    );
  });
});

describe("readTrustedKeys", () => {
  it("reads armored OpenPGP blocks and authorized_keys lines from the same text, skipping comments", async () => {
    const { publicKey } = await openpgp.generateKey({ userIDs: [{ name: "x" }], format: "armored" });
    const k = sshKey(keysDir, "ed25519");
    const keys = await readTrustedKeys([`# release keys\n${k.publicKey}\n\n${publicKey}\nbogus line\n`]);
    expect(keys.ssh).toHaveLength(1);
    expect(keys.openpgp).toHaveLength(1);
    expect(keys.problems).toHaveLength(1);
  });
});

describe("SSH signatures made by git (gpg.format=ssh)", () => {
  const signers: Record<string, SshSigner> = {};
  let dir: string;
  beforeAll(() => {
    dir = workRepo().dir;
    for (const t of ["ed25519", "ecdsa", "ecdsa384", "ecdsa521", "rsa"] as const)
      signers[t] = sshKey(keysDir, t);
  });

  for (const type of ["ed25519", "ecdsa", "ecdsa384", "ecdsa521", "rsa"] as const)
    it(`verifies a commit signed with an ${type} key`, async () => {
      const signer = signers[type] as SshSigner;
      const sha = commitFile(dir, `${type}.txt`, type, signer);
      const raw = rawCommit(dir, sha);
      expect(raw.toString()).toContain("-----BEGIN SSH SIGNATURE-----");
      const keys = await readTrustedKeys([signer.publicKey]);
      const v = await verifyCommit(raw, keys);
      expect(v).toMatchObject({ ok: true, format: "ssh", signer: `${type}@test` });
      // git itself agrees.
      writeAllowed(dir, signer);
      gitWith(dir)(["-c", `gpg.ssh.allowedSignersFile=${join(dir, "allowed")}`, "verify-commit", sha]);
    });

  it("refuses a tampered commit", async () => {
    const signer = signers.ed25519 as SshSigner;
    const raw = rawCommit(dir, commitFile(dir, "t.txt", "t", signer));
    const v = await verifyCommit(tamper(raw), await readTrustedKeys([signer.publicKey]));
    expect(v).toMatchObject({ ok: false, reason: StatusReason.SignatureInvalid });
    expect(!v.ok && v.message).toMatch(/does not verify/);
  });

  for (const type of ["ecdsa", "ecdsa521", "rsa"] as const)
    it(`refuses a tampered commit signed with ${type}`, async () => {
      const signer = signers[type] as SshSigner;
      const raw = rawCommit(dir, commitFile(dir, `t-${type}.txt`, "t", signer));
      const v = await verifyCommit(tamper(raw), await readTrustedKeys([signer.publicKey]));
      expect(v).toMatchObject({ ok: false, reason: StatusReason.SignatureInvalid });
    });

  it("names an untrusted key", async () => {
    const raw = rawCommit(dir, commitFile(dir, "u.txt", "u", signers.ed25519));
    const v = await verifyCommit(raw, await readTrustedKeys([(signers.rsa as SshSigner).publicKey]));
    expect(v).toMatchObject({ ok: false, reason: StatusReason.SignatureUntrusted });
    expect(!v.ok && v.message).toMatch(/SHA256:\S+ \(ssh-ed25519\), which is not among the trusted keys/);
  });

  it("refuses a signature made for another namespace", async () => {
    const signer = signers.ed25519 as SshSigner;
    const { payload } = splitSignedCommit(rawCommit(dir, commitFile(dir, "n.txt", "n", signer)));
    const forged = withSignature(payload, sshSign(signer, payload, "file"));
    const keys = await readTrustedKeys([signer.publicKey]);
    const v = await verifyCommit(forged, keys);
    expect(v).toMatchObject({ ok: false, reason: StatusReason.SignatureInvalid });
    expect(!v.ok && v.message).toMatch(/namespace "file"/);
    // The same signer in the git namespace, spliced the same way, verifies: the splice is exact.
    expect(await verifyCommit(withSignature(payload, sshSign(signer, payload, "git")), keys)).toMatchObject({
      ok: true,
    });
  });

  it("refuses a bad magic, a truncated blob, an unknown hash algorithm", async () => {
    const signer = signers.ed25519 as SshSigner;
    const keys = await readTrustedKeys([signer.publicKey]);
    const payload = Buffer.from("data");
    const armored = sshSign(signer, payload, "git");
    const blob = Buffer.from(armored.split("\n").slice(1, -2).join(""), "base64");
    const arm = (b: Buffer) =>
      `-----BEGIN SSH SIGNATURE-----\n${b.toString("base64")}\n-----END SSH SIGNATURE-----\n`;
    const badMagic = Buffer.from(blob);
    badMagic.write("XSHSIG", 0, "latin1");
    expect(await verifyDetached(payload, arm(badMagic), keys)).toMatchObject({
      reason: StatusReason.SignatureInvalid,
    });
    expect(await verifyDetached(payload, arm(blob.subarray(0, 40)), keys)).toMatchObject({
      reason: StatusReason.SignatureInvalid,
    });
    const sha1 = rebuild(blob, (f) => ({ ...f, hash: "sha1" }));
    expect(await verifyDetached(payload, arm(sha1), keys)).toMatchObject({
      reason: StatusReason.SignatureInvalid,
    });
    expect(((await verifyDetached(payload, arm(sha1), keys)) as { message: string }).message).toMatch(
      /"sha1" is refused/,
    );
    expect(await verifyDetached(payload, armored, keys)).toMatchObject({ ok: true });
  });

  it("needs a trusted key at all", async () => {
    const raw = rawCommit(dir, commitFile(dir, "k.txt", "k", signers.ed25519));
    const v = await verifyCommit(raw, await readTrustedKeys(["not a key"]));
    expect(v).toMatchObject({ ok: false, reason: StatusReason.NoTrustedKeys });
  });

  it("says an unsigned commit is unsigned", async () => {
    const raw = rawCommit(dir, commitFile(dir, "plain.txt", "p"));
    const v = await verifyCommit(raw, await readTrustedKeys([(signers.ed25519 as SshSigner).publicKey]));
    expect(v).toMatchObject({ ok: false, reason: StatusReason.CommitUnsigned });
  });

  it("verifies a signed annotated tag (git tag -s)", async () => {
    const signer = signers.ed25519 as SshSigner;
    commitFile(dir, "tagged.txt", "x");
    gitWith(dir, signer)(["tag", "-s", "-m", "release 1", "v1"]);
    const raw = execFileSync("git", ["cat-file", "tag", "v1"], { cwd: dir });
    expect(splitSignedTag(raw).signature).toContain("BEGIN SSH SIGNATURE");
    const keys = await readTrustedKeys([signer.publicKey]);
    expect(await verifyTag(raw, keys)).toMatchObject({ ok: true, format: "ssh" });
    expect(
      await verifyTag(tamper(Buffer.from(raw.toString().replace("release", "change"))), keys),
    ).toMatchObject({
      ok: false,
    });
  });
});

describe.skipIf(!hasGpg)("OpenPGP signatures made by git with gpg", () => {
  let ada: GpgSigner;
  let eve: GpgSigner;
  let rsa: GpgSigner;
  let dir: string;
  beforeAll(() => {
    dir = workRepo().dir;
    ada = gpgKey(keysDir);
    eve = gpgKey(keysDir, "Eve <eve@example.test>");
    rsa = gpgKey(keysDir, "Rsa <rsa@example.test>", "rsa3072");
  }, 60_000);
  afterAll(stopGpgAgents);

  it("a key's gpg-agent, started by signing, is stopped by stopGpgAgents (none outlives the suite)", async () => {
    const probe = gpgKey(keysDir, "Probe <probe@example.test>");
    commitFile(dir, "probe.txt", "p", probe);
    expect(gpgAgentsOf(probe.home).length).toBeGreaterThan(0);
    await stopGpgAgents();
    expect(gpgAgentsOf(probe.home)).toEqual([]);
    expect(gpgAgentsOf(ada.home)).toEqual([]);
  });

  it("verifies a commit signed with an ed25519 key, and names the key and user", async () => {
    const raw = rawCommit(dir, commitFile(dir, "a.txt", "a", ada));
    expect(raw.toString()).toContain("-----BEGIN PGP SIGNATURE-----");
    const v = await verifyCommit(raw, await readTrustedKeys([ada.publicKey, eve.publicKey]));
    expect(v).toEqual({
      ok: true,
      format: "openpgp",
      key: ada.fingerprint,
      signer: "Ada Release <ada@example.test>",
    });
  });

  it("verifies an annotated tag signed by git tag -s with gpg; an untrusted key's tag and a lightweight tag's commit do not verify", async () => {
    commitFile(dir, "t.txt", "t");
    gitWith(dir, ada)(["tag", "-s", "-m", "release 2", "v2"]);
    gitWith(dir, eve)(["tag", "-s", "-m", "release 2 by eve", "v2-eve"]);
    gitWith(dir)(["tag", "-a", "-m", "not signed", "v2-plain"]);
    const raw = (name: string) => execFileSync("git", ["cat-file", "tag", name], { cwd: dir });
    const keys = await readTrustedKeys([ada.publicKey]);
    expect(splitSignedTag(raw("v2")).signature).toContain("BEGIN PGP SIGNATURE");
    expect(await verifyTag(raw("v2"), keys)).toEqual({
      ok: true,
      format: "openpgp",
      key: ada.fingerprint,
      signer: "Ada Release <ada@example.test>",
    });
    expect(await verifyTag(raw("v2-eve"), keys)).toMatchObject({
      ok: false,
      reason: StatusReason.SignatureUntrusted,
    });
    expect(await verifyTag(raw("v2-plain"), keys)).toMatchObject({
      ok: false,
      reason: StatusReason.CommitUnsigned,
      message: "the tag is not signed",
    });
    expect(
      await verifyTag(tamper(Buffer.from(raw("v2").toString().replace("release", "changed"))), keys),
    ).toMatchObject({
      ok: false,
      reason: StatusReason.SignatureInvalid,
    });
  });

  it("verifies a commit signed with an RSA key", async () => {
    const raw = rawCommit(dir, commitFile(dir, "r.txt", "r", rsa));
    expect(await verifyCommit(raw, await readTrustedKeys([rsa.publicKey]))).toMatchObject({
      ok: true,
      key: rsa.fingerprint,
    });
  });

  it("refuses a tampered commit", async () => {
    const raw = rawCommit(dir, commitFile(dir, "b.txt", "b", ada));
    const v = await verifyCommit(tamper(raw), await readTrustedKeys([ada.publicKey]));
    expect(v).toMatchObject({ ok: false, reason: StatusReason.SignatureInvalid, key: ada.fingerprint });
  });

  it("names an untrusted key by its key ID", async () => {
    const raw = rawCommit(dir, commitFile(dir, "c.txt", "c", eve));
    const v = await verifyCommit(raw, await readTrustedKeys([ada.publicKey]));
    expect(v).toMatchObject({ ok: false, reason: StatusReason.SignatureUntrusted });
    expect(eve.fingerprint.endsWith((v as { key: string }).key)).toBe(true);
  });

  it("does not take an OpenPGP key for an SSH signature, or the reverse", async () => {
    const ssh = sshKey(keysDir, "ed25519");
    const sshSigned = rawCommit(dir, commitFile(dir, "d.txt", "d", ssh));
    expect(await verifyCommit(sshSigned, await readTrustedKeys([ada.publicKey]))).toMatchObject({
      reason: StatusReason.SignatureUntrusted,
    });
    const pgpSigned = rawCommit(dir, commitFile(dir, "e.txt", "e", ada));
    expect(await verifyCommit(pgpSigned, await readTrustedKeys([ssh.publicKey]))).toMatchObject({
      reason: StatusReason.SignatureUntrusted,
    });
  });
});

describe("OpenPGP signatures made with openpgp.js (no gpg needed)", () => {
  it("verifies a detached binary signature and refuses one over other bytes", async () => {
    const { privateKey, publicKey } = await openpgp.generateKey({
      userIDs: [{ name: "Bob", email: "bob@example.test" }],
      format: "object",
    });
    const payload = Buffer.from("tree abc\nauthor B <b@b> 1 +0000\n\nmsg\n");
    const signature = (await openpgp.sign({
      message: await openpgp.createMessage({ binary: payload }),
      signingKeys: privateKey,
      detached: true,
      format: "armored",
    })) as string;
    const keys = await readTrustedKeys([publicKey.armor()]);
    expect(await verifyCommit(withSignature(payload, signature), keys)).toMatchObject({
      ok: true,
      signer: "Bob <bob@example.test>",
    });
    expect(await verifyDetached(Buffer.from("other"), signature, keys)).toMatchObject({
      reason: StatusReason.SignatureInvalid,
    });
  });

  it("says a format it does not read is unsupported", async () => {
    const keys = await readTrustedKeys([sshKey(keysDir, "ed25519").publicKey]);
    expect(
      await verifyDetached(Buffer.from("x"), "-----BEGIN SIGNED MESSAGE-----\nabc\n", keys),
    ).toMatchObject({
      reason: StatusReason.SignatureUnsupported,
    });
  });
});

function writeAllowed(dir: string, signer: SshSigner) {
  execFileSync("sh", ["-c", `echo "ada@example.test ${signer.publicKey}" > allowed`], { cwd: dir });
}

type SigFields = { publicKey: Buffer; namespace: string; reserved: Buffer; hash: string; signature: Buffer };

/** An SSHSIG blob with some of its fields changed (the rest as they were). */
function rebuild(blob: Buffer, change: (f: SigFields) => SigFields): Buffer {
  let at = 10;
  const next = () => {
    const n = blob.readUInt32BE(at);
    const v = blob.subarray(at + 4, at + 4 + n);
    at += 4 + n;
    return v;
  };
  const f = change({
    publicKey: next(),
    namespace: next().toString(),
    reserved: next(),
    hash: next().toString(),
    signature: next(),
  });
  const str = (b: Buffer | string) => {
    const body = Buffer.from(b);
    const len = Buffer.alloc(4);
    len.writeUInt32BE(body.length);
    return Buffer.concat([len, body]);
  };
  return Buffer.concat([
    blob.subarray(0, 10),
    str(f.publicKey),
    str(f.namespace),
    str(f.reserved),
    str(f.hash),
    str(f.signature),
  ]);
}
