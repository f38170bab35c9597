import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sendRequest } from "./send.js";

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
    expect(r).toMatchObject({ kind: "answered", status: 200, body: "ok" });
    expect(lookups).toBe(1);
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
