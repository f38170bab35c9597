/**
 * A GitProvider's credentials go to its own origins only: every spelling of that origin is that
 * origin, anything else is refused, plain http only with the operator's flag. The guard's decision
 * is tested without connecting; the Git client's use of it against loopback listeners, where a
 * listener on another port must see no request at all.
 */
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import { type GitServer, startGitServer } from "../../test/git/server.js";
import { errorMessage } from "../errors.js";
import { credentialRefusal, credentialsIn, originOf, providerOrigins } from "./credentials.js";
import { advertise, GitRemoteError } from "./smart-http.js";

const OWN = "https://git.example";

/** Mixes the case of each letter, as a host may be written. */
const caseMix = (s: string) =>
  fc
    .array(fc.boolean(), { minLength: s.length, maxLength: s.length })
    .map((up) => [...s].map((ch, i) => (up[i] ? ch.toUpperCase() : ch.toLowerCase())).join(""));

/** An IPv4 address written as the URL parser also reads it: dotted, hex parts, one number, short forms. */
const ipv4Spelling = (a: number, b: number, c: number, d: number) =>
  fc.constantFrom(
    `${a}.${b}.${c}.${d}`,
    `0x${a.toString(16)}.0x${b.toString(16)}.0x${c.toString(16)}.0x${d.toString(16)}`,
    `${(((a << 24) >>> 0) + (b << 16) + (c << 8) + d) >>> 0}`,
    `${a}.${(b << 16) + (c << 8) + d}`,
    `0${a.toString(8)}.${b}.${c}.${d}`,
  );

/** An IPv6 address written in full, compressed, upper case, with an embedded IPv4 tail when it has one. */
const ipv6Spellings = (groups: number[]) => {
  const hex = groups.map((g) => g.toString(16));
  const out = [
    hex.join(":"),
    groups
      .map((g) => g.toString(16).padStart(4, "0"))
      .join(":")
      .toUpperCase(),
  ];
  const tail = groups.slice(6);
  out.push(
    `${hex.slice(0, 6).join(":")}:${(tail[0]! >> 8) & 255}.${tail[0]! & 255}.${(tail[1]! >> 8) & 255}.${tail[1]! & 255}`,
  );
  return fc.constantFrom(...out);
};

describe("where a credential may go", () => {
  it("every spelling of the provider's own origin is its origin: host case, default port, path, query, userinfo", () => {
    fc.assert(
      fc.property(
        fc.domain().chain((d) => fc.tuple(fc.constant(d), caseMix(d))),
        fc.constantFrom("", ":443"),
        fc.constantFrom("/", "/team/apps.git", "/x?y=1#z", ""),
        fc.constantFrom("", "someone@", "a:b@"),
        ([domain, host], port, path, userinfo) => {
          const own = originOf(`https://${domain}/`);
          fc.pre(own !== undefined);
          expect(
            credentialRefusal(`https://${userinfo}${host}${port}${path}`, [own as string]),
          ).toBeUndefined();
        },
      ),
      { numRuns: 300 },
    );
  });

  it("IPv4 and IPv6 addresses in every encoding the URL parser reads are the same origin, and no other", () => {
    fc.assert(
      fc.property(fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255)), ([a, b, c, d]) => {
        const own = originOf(`https://${a}.${b}.${c}.${d}:8443/`)!;
        fc.assert(
          fc.property(ipv4Spelling(a, b, c, d), (spelled) => {
            expect(credentialRefusal(`https://${spelled}:8443/r.git`, [own])).toBeUndefined();
            // The same address on another port, or written as an IPv4-mapped IPv6 address, is another origin.
            expect(credentialRefusal(`https://${spelled}:8444/r.git`, [own])?.reason).toBe(
              "CredentialHostRefused",
            );
            expect(credentialRefusal(`https://[::ffff:${a}.${b}.${c}.${d}]:8443/`, [own])?.reason).toBe(
              "CredentialHostRefused",
            );
          }),
          { numRuns: 5 },
        );
      }),
      { numRuns: 100 },
    );
    fc.assert(
      fc.property(fc.array(fc.nat(0xffff), { minLength: 8, maxLength: 8 }), (groups) => {
        const own = originOf(`https://[${groups.map((g) => g.toString(16)).join(":")}]/`)!;
        fc.assert(
          fc.property(ipv6Spellings(groups), (spelled) => {
            expect(credentialRefusal(`https://[${spelled}]/r.git`, [own])).toBeUndefined();
          }),
          { numRuns: 3 },
        );
      }),
      { numRuns: 100 },
    );
  });

  it("another host is refused however it is written: another name of the same address, a lookalike, a trick", () => {
    const refused = [
      "https://git.example.:443/team/apps", // the same name with its root dot
      "https://git.example:8443/team/apps",
      "https://evil.example/team/apps",
      "https://git.example.evil.example/team/apps",
      "https://git.example%2eevil.example/team/apps",
      "https://git.example@evil.example/team/apps",
      "https://evil.example#@git.example/",
      "https://evil.example\\@git.example/",
      "https://evil.example/?@git.example",
      "ssh://git.example/team/apps",
      "git://git.example/team/apps",
      "file:///etc/passwd",
      "not a url",
    ];
    for (const d of refused)
      expect(credentialRefusal(d, [OWN]), d).toMatchObject({ reason: "CredentialHostRefused" });
    // Loopback under other names: each is another origin.
    const loop = "https://127.0.0.1:7000";
    for (const d of [
      "https://localhost:7000/",
      "https://[::1]:7000/",
      "https://[::ffff:127.0.0.1]:7000/",
      "https://127.0.0.2:7000/",
      "https://127.0.0.1:7001/",
      "https://127.0.0.1/",
    ])
      expect(credentialRefusal(d, [loop]), d).toMatchObject({ reason: "CredentialHostRefused" });
    // Nothing allowed (a provider whose URL does not parse): nothing is sent anywhere.
    expect(credentialRefusal(`${OWN}/x`, [])).toMatchObject({ reason: "CredentialHostRefused" });
  });

  it("plain http carries a credential only when the operator allows it", () => {
    const own = "http://127.0.0.1:7000";
    expect(credentialRefusal("http://127.0.0.1:7000/r.git/info/refs", [own])).toMatchObject({
      reason: "InsecureTransport",
      message: expect.stringContaining("--allow-http-credentials"),
    });
    expect(
      credentialRefusal("http://127.0.0.1:7000/r.git/info/refs", [own], { allowHttp: true }),
    ).toBeUndefined();
    // The flag allows http, not another host.
    expect(credentialRefusal("http://127.0.0.1:7001/", [own], { allowHttp: true })).toMatchObject({
      reason: "CredentialHostRefused",
    });
    // An https provider's credential never goes to the same host over http.
    expect(credentialRefusal("http://git.example/x", [OWN], { allowHttp: true })).toMatchObject({
      reason: "CredentialHostRefused",
    });
  });

  it("a provider's origins are its clone URL's and its API's: api.github.com for github.com, its own apiURL", () => {
    expect(providerOrigins({ url: "https://GitHub.com/team/apps.git" })).toEqual([
      "https://github.com",
      "https://api.github.com",
    ]);
    expect(providerOrigins({ url: "https://git.example:443/team/apps" })).toEqual(["https://git.example"]);
    expect(
      providerOrigins({
        url: "https://git.example/team/apps",
        commitStatus: { apiURL: "https://api.git.example:8443/api/v1" },
      }),
    ).toEqual(["https://git.example", "https://api.git.example:8443"]);
    expect(providerOrigins({ url: "git@git.example:team/apps" })).toEqual([]);
  });

  it("the credential keys: password, else token; username defaults to git; empty means none", () => {
    expect(credentialsIn({ username: "bot", password: "p" })).toEqual({ username: "bot", password: "p" });
    expect(credentialsIn({ token: "t" })).toEqual({ username: "git", password: "t" });
    expect(credentialsIn({ password: "" })).toBeUndefined();
    expect(credentialsIn({})).toBeUndefined();
    expect(credentialsIn(undefined)).toBeUndefined();
  });
});

/** A listener recording each request's path and Authorization header. */
interface Listener {
  url: string;
  seen: { path: string; authorization: string | undefined }[];
  close(): Promise<void>;
}

async function listen(
  answer: (path: string, headers: IncomingHttpHeaders) => [number, Record<string, string>],
): Promise<Listener> {
  const seen: Listener["seen"] = [];
  const server: Server = createServer((req, res) => {
    seen.push({ path: req.url ?? "", authorization: req.headers.authorization });
    const [code, headers] = answer(req.url ?? "", req.headers);
    res.writeHead(code, headers);
    res.end();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

describe("the Git client sends a provider's credentials to its own origin only", () => {
  const closing: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of closing.splice(0)) await c();
  });
  const auth = { username: "bot", password: "s3cret" };

  it("over plain http without the operator's flag nothing is sent: no request at all", async () => {
    const git: GitServer = await startGitServer({ auth });
    closing.push(() => git.close());
    const url = await git.createRepo("r", { "a.txt": "a\n" });
    const err = await advertise({ url, auth }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GitRemoteError);
    expect((err as GitRemoteError).kind).toBe("auth");
    expect(errorMessage(err)).toMatch(/--allow-http-credentials/);
    expect(git.counts()).toEqual({ advertisement: 0, fetch: 0, push: 0 });
    // With the flag, the same call is answered.
    const ad = await advertise({ url, auth, allowHttpCredentials: true });
    expect(ad.refs.get("refs/heads/main")).toMatch(/^[0-9a-f]{40}$/);
  });

  it("a redirect to another origin is not followed: the listener there sees no request", async () => {
    const elsewhere = await listen(() => [200, {}]);
    closing.push(() => elsewhere.close());
    const front = await listen((path) => [302, { location: `${elsewhere.url}${path}` }]);
    closing.push(() => front.close());
    const err = await advertise({
      url: `${front.url}/team/apps.git`,
      auth,
      allowHttpCredentials: true,
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GitRemoteError);
    expect(errorMessage(err)).toMatch(/not the GitProvider's own host/);
    expect(front.seen.map((s) => s.authorization)).toEqual([
      `Basic ${Buffer.from("bot:s3cret").toString("base64")}`,
    ]);
    expect(elsewhere.seen).toEqual([]);
  });

  it("a redirect within the provider's origin is followed with the credential", async () => {
    const front = await listen((path) =>
      path.startsWith("/old/") ? [301, { location: path.replace("/old/", "/new/") }] : [404, {}],
    );
    closing.push(() => front.close());
    const err = await advertise({ url: `${front.url}/old/r.git`, auth, allowHttpCredentials: true }).catch(
      (e: unknown) => e,
    );
    expect(front.seen.map((s) => [s.path.split("?")[0], s.authorization !== undefined])).toEqual([
      ["/old/r.git/info/refs", true],
      ["/new/r.git/info/refs", true],
    ]);
    expect((err as GitRemoteError).kind).toBe("notFound");
  });
});
