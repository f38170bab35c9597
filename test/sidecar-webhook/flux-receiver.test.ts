/**
 * The webhook applier against a Flux-style generic-hmac Receiver: the receiver below is written
 * from Flux's documentation (notification-controller, docs/spec/v1/receivers.md, "Generic HMAC"),
 * not from applygate's signer. It serves the Receiver's path `/hook/<sha256(token+name+namespace)>`,
 * reads `X-Signature: <hash-function>=<hash>` (sha1, sha256 or sha512), computes the hash of the
 * raw body with the Secret's token the way the documentation's own example does —
 * `openssl dgst -<hash-function> -r -hmac "<token>"` — and requests a reconcile only on a match.
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NS, startWebhookWorld, until, type WebhookWorld } from "./harness.js";

let w: WebhookWorld;
beforeAll(async () => {
  w = await startWebhookWorld();
});
afterAll(async () => w?.close());

/** The documented HMAC: `printf '<body>' | openssl dgst -<fn> -r -hmac "<token>" | awk '{print $1}'`. */
function opensslHmac(fn: string, token: string, body: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile("openssl", ["dgst", `-${fn}`, "-r", "-hmac", token], (err, stdout) =>
      err ? reject(err) : resolve(stdout.trim().split(/\s+/)[0] ?? ""),
    );
    child.stdin?.end(body);
  });
}

/** A generic-hmac Receiver `name` in `namespace` with the Secret's `token`: path and verification as documented. */
function fluxReceiver(name: string, namespace: string, token: string) {
  const webhookPath = `/hook/${createHash("sha256")
    .update(token + name + namespace)
    .digest("hex")}`;
  const reconciles: string[] = [];
  const handler = async (
    r: { path: string; headers: Record<string, unknown>; raw: Buffer },
    res: import("node:http").ServerResponse,
  ) => {
    const answer = (status: number, text: string) => {
      res.statusCode = status;
      res.end(text);
    };
    if (r.path !== webhookPath) return answer(404, "not found");
    const header = String(r.headers["x-signature"] ?? "");
    const i = header.indexOf("=");
    const [fn, hash] = i < 0 ? ["", ""] : [header.slice(0, i), header.slice(i + 1)];
    if (!["sha1", "sha256", "sha512"].includes(fn)) return answer(400, "unsupported hash function");
    if ((await opensslHmac(fn, token, r.raw)) !== hash) return answer(400, "signature mismatch");
    reconciles.push(JSON.parse(r.raw.toString("utf8")).commit as string);
    return answer(200, "reconciliation requested");
  };
  return { webhookPath, reconciles, handler };
}

describe("a Flux-style generic-hmac Receiver", () => {
  it("accepts the applier's generic-hmac request signed with the Receiver's token: Succeeded", async () => {
    const rx = fluxReceiver("webapp", NS, "receiver-token");
    w.endpoint.handle((r, res) => void rx.handler(r, res));
    await w.createClaim(
      "flux-rx",
      { url: `${w.endpoint.url}${rx.webhookPath}`, signature: "generic-hmac", mode: "response" },
      "receiver-token",
    );
    const a = await w.send("flux-rx");
    await until(
      async () =>
        (await w.operation("flux-rx"))?.token === a.token &&
        (await w.operation("flux-rx"))?.phase === "Succeeded",
      "Succeeded",
    );
    expect(rx.reconciles).toEqual([a.commit]);
  });

  it("refuses a request signed with another key, and the operation is Failed with its status", async () => {
    const rx = fluxReceiver("webapp-other", NS, "receiver-token");
    w.endpoint.handle((r, res) => void rx.handler(r, res));
    await w.createClaim(
      "flux-rx-wrong",
      { url: `${w.endpoint.url}${rx.webhookPath}`, signature: "generic-hmac", mode: "response" },
      "not-the-receiver-token",
    );
    const a = await w.send("flux-rx-wrong");
    await until(
      async () =>
        (await w.operation("flux-rx-wrong"))?.token === a.token &&
        (await w.operation("flux-rx-wrong"))?.phase === "Failed",
      "Failed",
    );
    expect(await w.operation("flux-rx-wrong")).toMatchObject({
      outcome: "HTTP400",
      message: "the endpoint answered 400 Bad Request",
    });
    expect(rx.reconciles).toEqual([]);
  });

  it("a github-style claim does not satisfy it (no X-Signature): the style must be generic-hmac", async () => {
    const rx = fluxReceiver("webapp-gh", NS, "receiver-token");
    w.endpoint.handle((r, res) => void rx.handler(r, res));
    await w.createClaim(
      "flux-rx-gh",
      { url: `${w.endpoint.url}${rx.webhookPath}`, signature: "github", mode: "response" },
      "receiver-token",
    );
    const a = await w.send("flux-rx-gh");
    await until(
      async () =>
        (await w.operation("flux-rx-gh"))?.token === a.token &&
        (await w.operation("flux-rx-gh"))?.phase === "Failed",
      "Failed",
    );
    expect(rx.reconciles).toEqual([]);
  });
});
