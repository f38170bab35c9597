import { execFileSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { commitFile, gitWith, rawCommit, sshKey, workRepo } from "../../test/support/signing.js";
import type { BranchListing } from "../apply/catalog.js";
import { keysFromObjects, withKeyDigests } from "../apply/keys-secrets.js";
import { StatusReason } from "../crds/reasons.js";
import type { KObject } from "../kube/resources.js";
import { governanceOf } from "./objects.js";
import { type KeysSecretRead, keysDigest, SignatureReader } from "./signatures.js";

const b64 = (s: string) => Buffer.from(s).toString("base64");

describe("governanceOf reads approval.signature", () => {
  const sig = { secretRef: { name: "release-keys" } };
  const claim = (spec: Record<string, unknown>): KObject => ({
    metadata: { name: "c", namespace: "prod" },
    spec,
  });
  const target = (spec: Record<string, unknown>): KObject => ({
    metadata: { name: "t", namespace: "team" },
    spec,
  });

  it("on the claim: the Secret is in the claim's namespace, mode HEAD by default", () => {
    expect(governanceOf(target({}), claim({ approval: { signature: sig } }))?.approval).toEqual({
      sources: ["Signature"],
      signature: { secret: { namespace: "prod", name: "release-keys" }, mode: "HEAD" },
    });
  });

  it("on the GitTarget as the default: the Secret is in the GitTarget's namespace; combines with manual", () => {
    expect(governanceOf(target({ approval: { manual: true, signature: sig } }), claim({}))?.approval).toEqual(
      {
        sources: ["Manual", "Signature"],
        signature: { secret: { namespace: "team", name: "release-keys" }, mode: "HEAD" },
      },
    );
  });

  it("modes Tag and TagAndHEAD are read, with a tag pattern (ignored in mode HEAD)", () => {
    expect(
      governanceOf(target({}), claim({ approval: { signature: { ...sig, mode: "Tag", tagPattern: "v*" } } }))
        ?.approval?.signature,
    ).toEqual({ secret: { namespace: "prod", name: "release-keys" }, mode: "Tag", tagPattern: "v*" });
    expect(
      governanceOf(target({}), claim({ approval: { signature: { ...sig, mode: "TagAndHEAD" } } }))?.approval
        ?.signature,
    ).toEqual({ secret: { namespace: "prod", name: "release-keys" }, mode: "TagAndHEAD" });
    expect(
      governanceOf(target({}), claim({ approval: { signature: { ...sig, mode: "HEAD", tagPattern: "v*" } } }))
        ?.approval?.signature,
    ).toEqual({ secret: { namespace: "prod", name: "release-keys" }, mode: "HEAD" });
  });

  it("a mode not read, or no Secret named, is no signature source", () => {
    expect(
      governanceOf(target({}), claim({ approval: { signature: { ...sig, mode: "Commit" } } })),
    ).toBeUndefined();
    expect(governanceOf(target({}), claim({ approval: { signature: {} } }))).toBeUndefined();
  });
});

describe("keysDigest", () => {
  it("changes with the Secret's data, not with the order of its keys; an unreadable Secret has its own", () => {
    const a = keysDigest({ ok: true, data: { a: b64("1"), b: b64("2") } });
    expect(keysDigest({ ok: true, data: { b: b64("2"), a: b64("1") } })).toBe(a);
    expect(keysDigest({ ok: true, data: { a: b64("1") } })).not.toBe(a);
    expect(keysDigest({ ok: false, code: 404, message: "" })).toBe("unreadable:404");
  });
});

describe("withKeyDigests", () => {
  it("puts the digest of each named Secret into the listing", async () => {
    const listing = {
      targets: [
        {
          uid: "u",
          namespace: "prod",
          name: "t",
          claim: null,
          applier: null,
          source: null,
          onRefusal: "Ignore",
          suspended: false,
          governance: {
            changeWindows: [],
            approval: {
              sources: ["Signature"],
              signature: { secret: { namespace: "prod", name: "k" }, mode: "HEAD" },
            },
          },
        },
      ],
      claims: [],
    } as unknown as BranchListing;
    const data = { keys: b64("ssh-ed25519 AAAA") };
    await withKeyDigests(listing, async (ns, name) =>
      ns === "prod" && name === "k" ? { ok: true, data } : { ok: false, code: 404, message: "" },
    );
    expect(listing.targets[0]?.governance?.approval?.signature?.keys).toBe(keysDigest({ ok: true, data }));
  });
});

describe("SignatureReader", () => {
  const keysDir = mkdtempSync(join(tmpdir(), "sig-reader-"));
  const spec = { secret: { namespace: "prod", name: "k" }, mode: "HEAD" as const };

  it("checks each commit against the Secret's keys, once per key set", async () => {
    const ada = sshKey(keysDir, "ed25519", "ada");
    const eve = sshKey(keysDir, "ed25519", "eve");
    const { dir } = workRepo();
    const good = commitFile(dir, "a", "a", ada);
    const bad = commitFile(dir, "b", "b", eve);
    const plain = commitFile(dir, "c", "c");
    let secret: KeysSecretRead = {
      ok: true,
      data: { authorized_keys: b64(`# release\n${ada.publicKey}\n`) },
    };
    const reads: string[] = [];
    const reader = new SignatureReader(async () => secret);
    const rawOf = async (oid: string) => {
      reads.push(oid);
      return rawCommit(dir, oid);
    };
    const first = await reader.read(spec, [plain, bad, good], rawOf);
    expect(first.keys).toBe(keysDigest(secret));
    expect(first.signatures[good]).toMatchObject({ ok: true, signer: "ada" });
    expect(first.signatures[bad]).toMatchObject({ ok: false, reason: StatusReason.SignatureUntrusted });
    expect(first.signatures[plain]).toMatchObject({ ok: false, reason: StatusReason.CommitUnsigned });
    await reader.read(spec, [plain, bad, good], rawOf);
    expect(reads).toHaveLength(3);
    // Eve's key trusted too: checked again against the new set.
    secret = { ok: true, data: { a: b64(ada.publicKey), e: b64(eve.publicKey) } };
    const second = await reader.read(spec, [bad], rawOf);
    expect(second.signatures[bad]).toMatchObject({ ok: true, signer: "eve" });
    expect(second.keys).not.toBe(first.keys);
  });

  it("reads tags only in a tag mode: Tag verifies each tag object once per key set, TagAndHEAD the commits too", async () => {
    const ada = sshKey(keysDir, "ed25519", "ada");
    const { dir } = workRepo();
    const under = commitFile(dir, "u", "u");
    const top = commitFile(dir, "t", "t", ada);
    gitWith(dir, ada)(["tag", "-s", "-m", "release", "v1", top]);
    const tagObject = execFileSync("git", ["rev-parse", "refs/tags/v1"], { cwd: dir }).toString().trim();
    const secret: KeysSecretRead = { ok: true, data: { authorized_keys: b64(ada.publicKey) } };
    const reader = new SignatureReader(async () => secret);
    let listed = 0;
    const tagReads: string[] = [];
    const tagged = {
      line: [top, under],
      tags: async () => {
        listed++;
        return [{ name: "v1", object: tagObject, commit: top, annotated: true }];
      },
      rawTagOf: async (oid: string) => {
        tagReads.push(oid);
        return execFileSync("git", ["cat-file", "tag", oid], { cwd: dir });
      },
    };
    const rawOf = async (oid: string) => rawCommit(dir, oid);
    const head = await reader.read(spec, [top, under], rawOf, tagged);
    expect(listed).toBe(0);
    expect(head.signatures[under]).toMatchObject({ ok: false, reason: StatusReason.CommitUnsigned });
    const byTag = await reader.read({ ...spec, mode: "Tag" }, [top, under], rawOf, tagged);
    expect(byTag.keys).toBe(keysDigest(secret));
    for (const c of [top, under])
      expect(byTag.signatures[c]).toMatchObject({
        ok: true,
        signer: "ada",
        tag: { name: "v1", signer: "ada" },
      });
    const both = await reader.read({ ...spec, mode: "TagAndHEAD" }, [top, under], rawOf, tagged);
    expect(both.signatures[top]).toMatchObject({ ok: true, tag: { name: "v1" } });
    expect(both.signatures[under]).toMatchObject({ ok: false, reason: StatusReason.CommitUnsigned });
    expect(listed).toBe(2);
    expect(tagReads).toEqual([tagObject]);
  });

  it("a Secret that cannot be read trusts no key and says why", async () => {
    const reader = new SignatureReader(async () => ({ ok: false, code: 403, message: "forbidden" }));
    const out = await reader.read(spec, ["c1"], async () => new Uint8Array());
    expect(out.signatures.c1).toMatchObject({ ok: false, reason: StatusReason.NoTrustedKeys });
    expect((out.signatures.c1 as { message: string }).message).toContain(
      "bind applygate-secret-watcher in prod",
    );
    const missing = await new SignatureReader(async () => ({ ok: false, code: 404, message: "" })).read(
      spec,
      ["c1"],
      async () => new Uint8Array(),
    );
    expect((missing.signatures.c1 as { message: string }).message).toBe(
      "the keys Secret prod/k does not exist",
    );
  });

  it("keysFromObjects reads data and stringData of a Secret in a file", async () => {
    const keys = keysFromObjects([
      {
        kind: "Secret",
        metadata: { name: "k", namespace: "prod" },
        stringData: { x: "ssh-ed25519 A" },
      },
    ]);
    expect(await keys("prod", "k")).toEqual({ ok: true, data: { x: b64("ssh-ed25519 A") } });
    expect(await keys("prod", "other")).toMatchObject({ ok: false, code: 404 });
  });
});
