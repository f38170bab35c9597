import { isIP } from "node:net";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type AddressPolicy, judgeUrl, pickAddress, refusedAddress, refusedUrl } from "./address.js";

const DEFAULT: AddressPolicy = { allowInternal: false, refusePrivate: false };
const REFUSE_PRIVATE: AddressPolicy = { allowInternal: false, refusePrivate: true };
const ALLOW_INTERNAL: AddressPolicy = { allowInternal: true, refusePrivate: false };
/** Each policy the property tests run under refuses some range of each family. */
const POLICIES = [DEFAULT, REFUSE_PRIVATE, { allowInternal: true, refusePrivate: true }] as const;

/** What the guard makes of a URL's host (no lookup is ever made here). */
const judgeHost = (host: string, policy: AddressPolicy = DEFAULT) =>
  judgeUrl(`http://${host}:8080/hook`, { insecure: true, ...policy });

describe("refusedAddress: the ranges a WebhookClaim may not reach", () => {
  it.each([
    ["127.0.0.1", "loopback"],
    ["127.255.0.9", "loopback"],
    ["169.254.169.254", "link-local"],
    ["169.254.0.1", "link-local"],
    ["100.100.100.200", "metadata"],
    ["0.0.0.0", "this network"],
    ["::1", "loopback"],
    ["[::1]", "loopback"],
    ["::", "unspecified"],
    ["fe80::1", "link-local"],
    ["febf::1", "link-local"],
    ["fd00:ec2::254", "metadata"],
    ["64:ff9b:1::a9fe:a9fe", "local-use NAT64"],
  ])("refuses %s (%s)", (address, why) => {
    expect(refusedAddress(address)).toContain(why);
  });

  it.each([
    // IPv4-mapped, in each spelling the issue reported, and the URL parser's own rewriting.
    ["::ffff:127.0.0.1", "IPv4-mapped 127.0.0.1, loopback"],
    ["::ffff:7f00:1", "IPv4-mapped 127.0.0.1, loopback"],
    ["0:0:0:0:0:ffff:7f00:1", "IPv4-mapped 127.0.0.1, loopback"],
    ["0000:0000:0000:0000:0000:FFFF:7F00:0001", "IPv4-mapped 127.0.0.1, loopback"],
    ["::ffff:169.254.169.254", "IPv4-mapped 169.254.169.254, link-local"],
    ["::ffff:a9fe:a9fe", "IPv4-mapped 169.254.169.254, link-local"],
    ["::7f00:1", "IPv4-compatible 127.0.0.1, loopback"],
    ["::ffff:0:7f00:1", "IPv4-translated 127.0.0.1, loopback"],
    ["64:ff9b::7f00:1", "NAT64 127.0.0.1, loopback"],
    ["64:ff9b::169.254.169.254", "NAT64 169.254.169.254, link-local"],
    ["2002:7f00:1::", "6to4 127.0.0.1, loopback"],
    ["2002:a9fe:a9fe:1234::1", "6to4 169.254.169.254, link-local"],
    // Teredo: server 169.254.169.254 in clear; client 127.0.0.1 inverted (80ff:fffe).
    ["2001:0:a9fe:a9fe::808:808", "Teredo 169.254.169.254, link-local"],
    ["2001:0:808:808:0:0:80ff:fffe", "Teredo 127.0.0.1, loopback"],
  ])("refuses %s, the IPv4 address it carries (%s)", (address, why) => {
    expect(refusedAddress(address)).toContain(why);
  });

  it.each([
    "10.0.0.5",
    "192.168.1.10",
    "172.16.0.1",
    "100.64.0.1",
    "8.8.8.8",
    "100.100.100.201",
    "fd00:ec2::253",
    "fec0::1",
    "2001:db8::1",
    "::ffff:8.8.8.8",
    "64:ff9b::808:808",
    "2002:808:808::1",
    "2001:0:808:808::f7f7:f7f7",
  ])("allows %s by default", (address) => {
    expect(refusedAddress(address)).toBeUndefined();
  });

  it("refuses private ranges, in every form, only when the operator asks", () => {
    for (const a of ["10.0.0.5", "172.31.255.1", "192.168.1.10", "100.64.0.1", "fd12::1", "fec0::1"]) {
      expect(refusedAddress(a, DEFAULT)).toBeUndefined();
      expect(refusedAddress(a, REFUSE_PRIVATE)).toContain("private");
    }
    expect(refusedAddress("::ffff:10.1.2.3", REFUSE_PRIVATE)).toContain("IPv4-mapped 10.1.2.3, private");
    expect(refusedAddress("64:ff9b::a01:203", REFUSE_PRIVATE)).toContain("NAT64 10.1.2.3, private");
  });

  it("allows internal addresses, in every form, when the operator allows them", () => {
    for (const a of ["127.0.0.1", "::ffff:7f00:1", "64:ff9b::7f00:1", "::1", "169.254.169.254"])
      expect(refusedAddress(a, ALLOW_INTERNAL)).toBeUndefined();
  });

  it("refuses what Node would not connect to as an address (it would resolve it as a name)", () => {
    expect(refusedAddress("metadata.google.internal")).toContain("not an IP address");
    expect(refusedAddress("0177.0.0.1")).toContain("not an IP address");
    expect(refusedAddress("2130706433")).toContain("not an IP address");
  });
});

describe("judgeUrl: the host as the URL parser leaves it", () => {
  it.each([
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
    "[0:0:0:0:0:ffff:7f00:1]",
    "[::127.0.0.1]",
    "[64:ff9b::127.0.0.1]",
    "[2002:7f00:1::]",
    "2130706433",
    "0x7f000001",
    "017700000001",
    "0x7f.1",
    "127.1",
    "0177.0.0.1",
    "127.0.0.1.",
    "%31%32%37.0.0.1",
    "１２７．０．０．１",
    "169.16689662",
  ])("refuses http://%s/ before any lookup", (host) => {
    expect(judgeHost(host)).toMatchObject({ kind: "refused", reason: "AddressRefused" });
  });

  it("a name is left to resolution; an allowed address is called as written", () => {
    expect(judgeHost("deploy.example")).toEqual({ kind: "name", host: "deploy.example" });
    expect(judgeHost("0x08080808")).toEqual({ kind: "address", host: "8.8.8.8", address: "8.8.8.8" });
  });
});

describe("pickAddress: a name is judged by every address it resolves to", () => {
  it("refuses a name with any refused address, and picks the first otherwise", () => {
    expect(pickAddress("h", ["10.1.2.3", "::ffff:7f00:1"], DEFAULT)).toMatchObject({
      ok: false,
      reason: "AddressRefused",
    });
    expect(pickAddress("h", ["10.1.2.3", "10.1.2.4"], DEFAULT)).toEqual({ ok: true, address: "10.1.2.3" });
    expect(pickAddress("h", [], DEFAULT)).toMatchObject({ ok: false, reason: "ResolveFailed" });
  });
});

describe("refusedUrl", () => {
  it("requires https unless insecure", () => {
    expect(refusedUrl("http://deploy.example/x", { insecure: false })).toContain("insecure");
    expect(refusedUrl("http://deploy.example/x", { insecure: true })).toBeUndefined();
    expect(refusedUrl("https://deploy.example/x", { insecure: false })).toBeUndefined();
  });
  it("refuses other schemes and credentials in the URL", () => {
    expect(refusedUrl("file:///etc/passwd", { insecure: true })).toContain("not http");
    expect(refusedUrl("https://u:p@deploy.example/x", { insecure: false })).toContain("credentials");
    expect(refusedUrl("not a url", { insecure: true })).toContain("not a URL");
  });
});

// ---------------------------------------------------------------------------------------------
// Every spelling of one address is judged alike. The expected judgement comes from this table and
// from how each address was built (which IPv4 address an IPv6 one carries), never from the guard.

const V4_RANGES: { base: number; len: number; why: string; group: "internal" | "private" }[] = [
  { base: 0x7f000000, len: 8, why: "loopback", group: "internal" },
  { base: 0x00000000, len: 8, why: "this network", group: "internal" },
  { base: 0xa9fe0000, len: 16, why: "link-local", group: "internal" },
  { base: 0x646464c8, len: 32, why: "metadata", group: "internal" },
  { base: 0x0a000000, len: 8, why: "private", group: "private" },
  { base: 0xac100000, len: 12, why: "private", group: "private" },
  { base: 0xc0a80000, len: 16, why: "private", group: "private" },
  { base: 0x64400000, len: 10, why: "private", group: "private" },
];
/** Native IPv6 ranges, as the first bytes of the prefix and its length. */
const V6_RANGES: { prefix: number[]; len: number; why: string; group: "internal" | "private" }[] = [
  { prefix: [...Array(15).fill(0), 1], len: 128, why: "loopback", group: "internal" },
  { prefix: Array(16).fill(0), len: 128, why: "unspecified", group: "internal" },
  { prefix: [0xfe, 0x80], len: 10, why: "link-local", group: "internal" },
  {
    prefix: [0xfd, 0, 0x0e, 0xc2, ...Array(10).fill(0), 0x02, 0x54],
    len: 128,
    why: "metadata",
    group: "internal",
  },
  { prefix: [0, 0x64, 0xff, 0x9b, 0, 1], len: 48, why: "local-use NAT64", group: "internal" },
  { prefix: [0xfc], len: 7, why: "private", group: "private" },
  { prefix: [0xfe, 0xc0], len: 10, why: "private", group: "private" },
];

const applies = (group: "internal" | "private", p: AddressPolicy) =>
  group === "internal" ? !p.allowInternal : p.refusePrivate;
const v4Why = (n: number, p: AddressPolicy) =>
  V4_RANGES.find(
    (r) => applies(r.group, p) && (r.len === 0 || n >>> (32 - r.len) === r.base >>> (32 - r.len)),
  )?.why;
const bytesOf = (n: number) => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255];
const u32 = fc.integer({ min: 0, max: 0xffffffff });

const refusedV4 = (p: AddressPolicy) =>
  fc
    .constantFrom(...V4_RANGES.filter((r) => applies(r.group, p)))
    .chain((r) => u32.map((x) => (r.len === 32 ? r.base : (((r.base | (x >>> r.len)) >>> 0) as number))));
const allowedV4 = (p: AddressPolicy) => u32.filter((n) => v4Why(n, p) === undefined);

// The URL parser's IPv4 spellings: 1 to 4 parts, each decimal, octal or hex (any case, extra
// leading zeros), a trailing dot, then percent-encoded or full-width characters.
const partSpelling = (v: number) =>
  fc.oneof(
    fc.constant(String(v)),
    fc.nat(3).map((z) => `0${"0".repeat(z)}${v.toString(8)}`),
    fc.record({ z: fc.nat(3), upper: fc.boolean(), bigX: fc.boolean() }).map(({ z, upper, bigX }) => {
      const hex = "0".repeat(z) + v.toString(16);
      return `${bigX ? "0X" : "0x"}${upper ? hex.toUpperCase() : hex}`;
    }),
  );
const FULL_WIDTH: Record<string, string> = { ".": "．", x: "ｘ", X: "Ｘ" };
for (let d = 0; d < 10; d++) FULL_WIDTH[String(d)] = String.fromCharCode(0xff10 + d);
const v4UrlSpelling = (n: number) =>
  fc
    .integer({ min: 1, max: 4 })
    .chain((k) => {
      const b = bytesOf(n);
      const last = k === 1 ? n : k === 2 ? n & 0xffffff : k === 3 ? n & 0xffff : n & 0xff;
      return fc.tuple(...[...b.slice(0, k - 1), last].map(partSpelling));
    })
    .chain((parts) =>
      fc.record({
        text: fc.boolean().map((dot) => parts.join(".") + (dot ? "." : "")),
        mask: fc.array(fc.constantFrom("keep", "percent", "wide"), { minLength: 32, maxLength: 32 }),
      }),
    )
    .map(({ text, mask }) =>
      [...text]
        .map((ch, i) => {
          const how = mask[i % mask.length];
          if (how === "percent") return `%${ch.charCodeAt(0).toString(16).padStart(2, "0")}`;
          if (how === "wide" && FULL_WIDTH[ch]) return FULL_WIDTH[ch];
          return ch;
        })
        .join(""),
    );

// IPv6 text of 16 bytes: any run of zero groups compressed or not, each group in any case with
// leading zeros, the last 32 bits in hex or dotted decimal. Valid both for the URL parser (in
// brackets) and for Node's isIP (a resolver's answer).
const v6Spelling = (bytes: number[]) => {
  const groups = Array.from({ length: 8 }, (_, i) => (bytes[2 * i]! << 8) | bytes[2 * i + 1]!);
  return fc
    .record({
      dotted: fc.boolean(),
      pads: fc.array(fc.nat(3), { minLength: 8, maxLength: 8 }),
      uppers: fc.array(fc.boolean(), { minLength: 8, maxLength: 8 }),
      run: fc.nat(),
      compress: fc.boolean(),
    })
    .map(({ dotted, pads, uppers, run, compress }) => {
      const m = dotted ? 6 : 8;
      const tokens = groups.slice(0, m).map((g, i) => {
        const h = g.toString(16);
        const t = h.padStart(Math.min(4, h.length + pads[i]!), "0");
        return uppers[i] ? t.toUpperCase() : t;
      });
      if (dotted) tokens.push(bytes.slice(12).join("."));
      const runs: [number, number][] = [];
      for (let i = 0; i < m; i++) for (let j = i + 1; j <= m && groups[j - 1] === 0; j++) runs.push([i, j]);
      if (!compress || runs.length === 0) return tokens.join(":");
      const [i, j] = runs[run % runs.length]!;
      return `${tokens.slice(0, i).join(":")}::${tokens.slice(j).join(":")}`;
    });
};

const randomBytes = (n: number) => fc.array(fc.integer({ min: 0, max: 255 }), { minLength: n, maxLength: n });
const withPrefix = (prefix: number[], len: number, rest: number[]) =>
  rest.map((b, i) => {
    const bits = Math.max(0, Math.min(8, len - 8 * i));
    const mask = (0xff << (8 - bits)) & 0xff;
    return ((prefix[i] ?? 0) & mask) | (b & ~mask & 0xff);
  });

/** Ways an IPv6 address carries one IPv4 address (the rest filled with `fill`). */
const CARRY: Record<string, (v4: number[], fill: number[], other: number[]) => number[]> = {
  mapped: (v) => [...Array(10).fill(0), 0xff, 0xff, ...v],
  compatible: (v) => [...Array(12).fill(0), ...v],
  translated: (v) => [...Array(8).fill(0), 0xff, 0xff, 0, 0, ...v],
  nat64: (v) => [0, 0x64, 0xff, 0x9b, ...Array(8).fill(0), ...v],
  sixToFour: (v, f) => [0x20, 0x02, ...v, ...f.slice(0, 10)],
  teredoServer: (v, f, other) => [0x20, 0x01, 0, 0, ...v, ...f.slice(0, 4), ...other.map((x) => x ^ 0xff)],
  teredoClient: (v, f, other) => [0x20, 0x01, 0, 0, ...other, ...f.slice(0, 4), ...v.map((x) => x ^ 0xff)],
};
/** `::` and `::1` (IPv4-compatible 0.0.0.0 and 0.0.0.1) are judged as IPv6 first: left to V6_RANGES. */
const carried = (v4: fc.Arbitrary<number>, other: fc.Arbitrary<number>) =>
  fc
    .record({ how: fc.constantFrom(...Object.keys(CARRY)), v4, fill: randomBytes(10), other })
    .map(({ how, v4, fill, other }) => CARRY[how]!(bytesOf(v4), fill, bytesOf(other)))
    .filter((b) => !(b.slice(0, 15).every((x) => x === 0) && b[15]! <= 1));

const refusedV6 = (p: AddressPolicy) =>
  fc
    .constantFrom(...V6_RANGES.filter((r) => applies(r.group, p)))
    .chain((r) => randomBytes(16).map((b) => withPrefix(r.prefix, r.len, b)));
/** Global unicast outside the prefixes that carry an IPv4 address (2001::/32, 2002::/16). */
const allowedV6 = randomBytes(16)
  .map((b) => [0x20 | (b[0]! & 0x1f), ...b.slice(1)])
  .filter((b) => !(b[0] === 0x20 && (b[1] === 0x02 || (b[1] === 0x01 && b[2] === 0 && b[3] === 0))));

/** A resolver's answer in this spelling (a text Node connects to as an address) is refused. */
const resolvedRefused = (p: AddressPolicy, spelling: string) => {
  expect(isIP(spelling), spelling).toBe(6);
  expect(pickAddress("deploy.example", [spelling], p), spelling).toMatchObject({
    ok: false,
    reason: "AddressRefused",
  });
};
const resolvedAllowed = (p: AddressPolicy, spelling: string) => {
  expect(isIP(spelling), spelling).toBe(6);
  expect(pickAddress("deploy.example", [spelling], p), spelling).toEqual({ ok: true, address: spelling });
};

describe.each(POLICIES)("every spelling of one address is judged alike (%o)", (p) => {
  it("an IPv4 address the guard refuses is refused in every URL spelling, with its range named", () => {
    fc.assert(
      fc.property(
        refusedV4(p).chain((n) => fc.tuple(fc.constant(n), v4UrlSpelling(n))),
        ([n, s]) => {
          const r = judgeHost(s, p);
          expect(r, s).toMatchObject({ kind: "refused", reason: "AddressRefused" });
          expect((r as { message: string }).message, s).toContain(v4Why(n, p));
        },
      ),
    );
  });

  it("an IPv4 address the guard allows is allowed in every URL spelling, and called as dotted decimal", () => {
    fc.assert(
      fc.property(
        allowedV4(p).chain((n) => fc.tuple(fc.constant(n), v4UrlSpelling(n))),
        ([n, s]) => {
          const dotted = bytesOf(n).join(".");
          expect(judgeHost(s, p), s).toEqual({ kind: "address", host: dotted, address: dotted });
        },
      ),
    );
  });

  it("an IPv6 address carrying a refused IPv4 address is refused in every spelling, in a URL and as a resolved address", () => {
    fc.assert(
      fc.property(
        refusedV4(p).chain((n) =>
          fc.tuple(
            fc.constant(n),
            carried(fc.constant(n), allowedV4(p)).chain((b) => v6Spelling(b)),
          ),
        ),
        ([n, s]) => {
          const r = judgeHost(`[${s}]`, p);
          expect(r, s).toMatchObject({ kind: "refused", reason: "AddressRefused" });
          expect((r as { message: string }).message, s).toContain(v4Why(n, p));
          resolvedRefused(p, s);
        },
      ),
    );
  });

  it("an IPv6 address carrying an allowed IPv4 address is allowed in every spelling", () => {
    fc.assert(
      fc.property(
        carried(allowedV4(p), allowedV4(p)).chain((b) => v6Spelling(b)),
        (s) => {
          expect(judgeHost(`[${s}]`, p), s).toMatchObject({ kind: "address" });
          resolvedAllowed(p, s);
        },
      ),
    );
  });

  it("an address of a refused IPv6 range is refused in every spelling", () => {
    fc.assert(
      fc.property(
        refusedV6(p).chain((b) => v6Spelling(b)),
        (s) => {
          expect(judgeHost(`[${s}]`, p), s).toMatchObject({ kind: "refused", reason: "AddressRefused" });
          resolvedRefused(p, s);
        },
      ),
    );
  });

  it("a global IPv6 address that carries no IPv4 address is allowed in every spelling", () => {
    fc.assert(
      fc.property(
        allowedV6.chain((b) => v6Spelling(b)),
        (s) => {
          expect(judgeHost(`[${s}]`, p), s).toMatchObject({ kind: "address" });
          resolvedAllowed(p, s);
        },
      ),
    );
  });
});
