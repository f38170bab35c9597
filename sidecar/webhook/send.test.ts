import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pinnedLookup, sendRequest } from "./send.js";

let server: Server;
let port: number;
let hits = 0;
beforeAll(async () => {
  server = createServer((req, res) => {
    hits++;
    req.resume();
    req.on("end", () => res.end("ok"));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  port = (server.address() as AddressInfo).port;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

const base = { bytes: Buffer.from("{}"), headers: {}, timeoutMs: 2000, insecure: true };

describe("sendRequest: the address is checked after name resolution", () => {
  it("refuses a name that resolves to the metadata address, and calls nothing", async () => {
    const before = hits;
    const r = await sendRequest({
      ...base,
      url: "http://deploy.example/hook",
      allowInternal: false,
      resolve: async () => [{ address: "169.254.169.254", family: 4 }],
    });
    expect(r).toMatchObject({ kind: "notSent", reason: "AddressRefused" });
    expect(hits).toBe(before);
  });

  it("refuses a name when any of its addresses is refused (no pick of the good one)", async () => {
    const r = await sendRequest({
      ...base,
      url: "http://deploy.example/hook",
      allowInternal: false,
      resolve: async () => [
        { address: "10.1.2.3", family: 4 },
        { address: "fd00:ec2::254", family: 6 },
      ],
    });
    expect(r).toMatchObject({ kind: "notSent", reason: "AddressRefused" });
  });

  it("refuses a literal loopback address in the URL", async () => {
    const before = hits;
    const r = await sendRequest({ ...base, url: `http://127.0.0.1:${port}/x`, allowInternal: false });
    expect(r).toMatchObject({ kind: "notSent", reason: "AddressRefused" });
    expect(hits).toBe(before);
  });

  it("connects to the address that was checked, whatever the name resolves to later", async () => {
    let lookups = 0;
    const r = await sendRequest({
      ...base,
      url: `http://deploy.example:${port}/x`,
      allowInternal: true,
      resolve: async () => {
        lookups++;
        return [{ address: "127.0.0.1", family: 4 }];
      },
    });
    expect(r).toEqual({ kind: "answered", status: 200 });
    expect(lookups).toBe(1);
  });

  it("the socket's lookup answers every question with the checked address", () => {
    const lookup = pinnedLookup({ address: "127.0.0.1", family: 4 });
    const seen: unknown[] = [];
    lookup("elsewhere.example", {}, (_e, address, family) => seen.push([address, family]));
    lookup("elsewhere.example", { all: true }, (_e, addresses) => seen.push(addresses));
    expect(seen).toEqual([["127.0.0.1", 4], [{ address: "127.0.0.1", family: 4 }]]);
  });

  it("plain http needs insecure", async () => {
    const r = await sendRequest({
      ...base,
      insecure: false,
      url: `http://127.0.0.1:${port}/x`,
      allowInternal: true,
    });
    expect(r).toMatchObject({ kind: "notSent", reason: "URLRefused" });
  });

  it("a refused connection is not sent (RequestFailed), never lost", async () => {
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
    const p = (closed.address() as AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    const r = await sendRequest({ ...base, url: `http://127.0.0.1:${p}/x`, allowInternal: true });
    expect(r).toMatchObject({ kind: "notSent", reason: "ConnectFailed" });
  });
});

describe("sendRequest: every spelling of a refused address is refused before connecting", () => {
  // Spellings that all reach 127.0.0.1 (so a failure of the guard could only reach the loopback
  // listener): the URL parser rewrites each to 127.0.0.1 or [::ffff:7f00:1].
  const LOOPBACK = [
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
    "[0:0:0:0:0:ffff:7f00:1]",
    "[0000:0000:0000:0000:0000:FFFF:7F00:0001]",
    "2130706433",
    "0x7f000001",
    "0177.0.0.1",
    "0x7f.1",
    "127.1",
    "%31%32%37.0.0.1",
    "１２７．０．０．１",
  ];

  it.each(LOOPBACK)(
    "http://%s:P/ is refused with the guard on: the listener receives nothing",
    async (host) => {
      const before = hits;
      const r = await sendRequest({ ...base, url: `http://${host}:${port}/x`, allowInternal: false });
      expect(r).toMatchObject({ kind: "notSent", reason: "AddressRefused" });
      expect((r as { message: string }).message).toContain("loopback");
      expect(hits).toBe(before);
    },
  );

  it("each of those spellings does reach the loopback listener when internal addresses are allowed", async () => {
    for (const host of LOOPBACK) {
      const before = hits;
      const r = await sendRequest({ ...base, url: `http://${host}:${port}/x`, allowInternal: true });
      expect(r, host).toEqual({ kind: "answered", status: 200 });
      expect(hits, host).toBe(before + 1);
    }
  });

  it("a name that resolves to any spelling of a refused address is refused, and nothing is called", async () => {
    for (const address of ["::ffff:127.0.0.1", "::ffff:7f00:1", "0:0:0:0:0:ffff:7f00:1", "127.0.0.1"]) {
      const before = hits;
      const r = await sendRequest({
        ...base,
        url: `http://deploy.example:${port}/x`,
        allowInternal: false,
        resolve: async () => [{ address, family: 6 }],
      });
      expect(r, address).toMatchObject({ kind: "notSent", reason: "AddressRefused" });
      expect(hits, address).toBe(before);
    }
    // The same answer, allowed: the connection goes to the address resolved and checked.
    const before = hits;
    const r = await sendRequest({
      ...base,
      url: `http://deploy.example:${port}/x`,
      allowInternal: true,
      resolve: async () => [{ address: "::ffff:7f00:1", family: 6 }],
    });
    expect(r).toEqual({ kind: "answered", status: 200 });
    expect(hits).toBe(before + 1);
  });
});

describe("sendRequest: only the status of an answer is kept", () => {
  it("a failed answer's body is not read into the result", async () => {
    const secret = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        res.statusCode = 500;
        res.end("aws_secret_access_key=AKIA-not-for-the-claim");
      });
    });
    await new Promise<void>((r) => secret.listen(0, "127.0.0.1", r));
    const p = (secret.address() as AddressInfo).port;
    try {
      const r = await sendRequest({ ...base, url: `http://127.0.0.1:${p}/x`, allowInternal: true });
      expect(r).toEqual({ kind: "answered", status: 500 });
    } finally {
      await new Promise<void>((res) => secret.close(() => res()));
    }
  });
});
