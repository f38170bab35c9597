import { describe, expect, it } from "vitest";
import type { SignatureRead } from "./model.js";
import { type TagRead, tagMatches, tagSignatures } from "./tag-approval.js";

const ok = (key: string): SignatureRead => ({ ok: true, key, signer: "ada" });
const untrusted: SignatureRead = {
  ok: false,
  reason: "SignatureUntrusted",
  message: "signed by SSH key SHA256:eve",
};
const tag = (name: string, commit: string, verdict?: SignatureRead): TagRead => ({
  name,
  commit,
  annotated: verdict !== undefined,
  ...(verdict ? { verdict } : {}),
});

// The first-parent line from the tip back to the last applied commit, newest first.
const LINE = ["c4", "c3", "c2", "c1"];

describe("tagSignatures (mode Tag)", () => {
  it("a signed tag approves its commit and every commit under it since the last applied one", () => {
    const out = tagSignatures("Tag", LINE, LINE, [tag("v1", "c4", ok("K"))]);
    for (const c of LINE)
      expect(out[c]).toEqual({
        ok: true,
        key: "K",
        signer: "ada",
        tag: { name: "v1", key: "K", signer: "ada" },
      });
  });

  it("commits above the newest trusted tag are approved by none (the tip waits); each is covered by the nearest tag", () => {
    const out = tagSignatures("Tag", LINE, LINE, [tag("v1", "c1", ok("K1")), tag("v2", "c3", ok("K2"))]);
    expect(out.c4).toMatchObject({ ok: false, reason: "CommitNotTagged" });
    expect(out.c3).toMatchObject({ ok: true, tag: { name: "v2" } });
    expect(out.c2).toMatchObject({ ok: true, tag: { name: "v2" } });
    expect(out.c1).toMatchObject({ ok: true, tag: { name: "v1", key: "K1" } });
  });

  it("a lightweight tag or one by an untrusted key approves nothing, and says why", () => {
    expect(tagSignatures("Tag", LINE, ["c4"], [tag("v1", "c4")]).c4).toMatchObject({
      ok: false,
      reason: "CommitUnsigned",
      message: "tag v1 is a lightweight tag: it carries no signature",
    });
    expect(tagSignatures("Tag", LINE, ["c4"], [tag("v1", "c4", untrusted)]).c4).toEqual({
      ok: false,
      reason: "SignatureUntrusted",
      message: "tag v1: signed by SSH key SHA256:eve",
    });
    // An untrusted tag beside a trusted one on the same commit: the trusted one approves.
    expect(
      tagSignatures("Tag", LINE, ["c4"], [tag("a", "c4", untrusted), tag("b", "c4", ok("K"))]).c4,
    ).toMatchObject({
      ok: true,
      tag: { name: "b" },
    });
  });

  it("a tag on one of the worker's own commits above approves the foreign ones under it; tags off the line count for nothing", () => {
    const out = tagSignatures(
      "Tag",
      ["own", "c2", "c1"],
      ["c2", "c1"],
      [tag("v1", "own", ok("K")), tag("x", "side", ok("K"))],
    );
    expect(out).toMatchObject({ c2: { ok: true }, c1: { ok: true } });
    expect(Object.keys(out)).toEqual(["c2", "c1"]);
    expect(tagSignatures("Tag", LINE, ["c4"], [tag("x", "side", ok("K"))]).c4).toMatchObject({
      reason: "CommitNotTagged",
    });
  });

  it("with a tag pattern only matching tags are read", () => {
    const tags = [tag("nightly-4", "c4", ok("K")), tag("v1.0.0", "c2", ok("K"))];
    const out = tagSignatures("Tag", LINE, LINE, tags, "v*");
    expect(out.c4).toMatchObject({
      ok: false,
      reason: "CommitNotTagged",
      message: expect.stringContaining('matching "v*"'),
    });
    expect(out.c3).toMatchObject({ ok: false });
    expect(out.c2).toMatchObject({ ok: true, tag: { name: "v1.0.0" } });
    expect(tagMatches("v1.2.3", "v*")).toBe(true);
    expect(tagMatches("release/v1", "v*")).toBe(false);
    expect(tagMatches("v1", "v?")).toBe(true);
    expect(tagMatches("v1.x", "v1.?")).toBe(true);
    expect(tagMatches("v1x", "v1.?")).toBe(false);
    expect(tagMatches("anything", undefined)).toBe(true);
  });
});

describe("tagSignatures (mode TagAndHEAD)", () => {
  it("asks both: the commit's own signature and a trusted tag covering it", () => {
    const heads: Record<string, SignatureRead> = {
      c4: ok("H"),
      c3: { ok: false, reason: "CommitUnsigned", message: "the commit is not signed" },
    };
    const out = tagSignatures("TagAndHEAD", LINE, ["c4", "c3"], [tag("v1", "c4", ok("T"))], undefined, heads);
    expect(out.c4).toEqual({
      ok: true,
      key: "H",
      signer: "ada",
      tag: { name: "v1", key: "T", signer: "ada" },
    });
    expect(out.c3).toMatchObject({ ok: false, reason: "CommitUnsigned" });
    const untagged = tagSignatures("TagAndHEAD", LINE, ["c4"], [], undefined, heads);
    expect(untagged.c4).toMatchObject({ ok: false, reason: "CommitNotTagged" });
  });
});
