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
import { describe, expect, it } from "vitest";
import { fileWorld } from "../support/file-world.js";
import { NS, startWebhookWorld } from "./harness.js";

const w = fileWorld(() => startWebhookWorld());

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

/**
 * A Receiver `receiver` (token receiver-token) behind the endpoint, and the claim `claim` calling
 * it in mode response with `signature` and `key`: one attempt sent, waited to `phase`.
 */
async function sendThrough(
  receiver: string,
  claim: string,
  o: { signature: "generic-hmac" | "github"; key: string; phase: "Succeeded" | "Failed" },
) {
  const rx = fluxReceiver(receiver, NS, "receiver-token");
  w.endpoint.handle((r, res) => void rx.handler(r, res));
  const url = `${w.endpoint.url}${rx.webhookPath}`;
  await w.createClaim(claim, { url, signature: o.signature, mode: "response" }, o.key);
  const a = await w.send(claim);
  return { rx, a, op: await w.reaches(claim, o.phase, a.token) };
}

describe("a Flux-style generic-hmac Receiver", () => {
  it("accepts the applier's generic-hmac request signed with the Receiver's token: Succeeded", async () => {
    const { rx, a } = await sendThrough("webapp", "flux-rx", {
      signature: "generic-hmac",
      key: "receiver-token",
      phase: "Succeeded",
    });
    expect(rx.reconciles).toEqual([a.commit]);
  });

  it("refuses a request signed with another key, and the operation is Failed with its status", async () => {
    const { rx, op } = await sendThrough("webapp-other", "flux-rx-wrong", {
      signature: "generic-hmac",
      key: "not-the-receiver-token",
      phase: "Failed",
    });
    expect(op).toMatchObject({ outcome: "HTTP400", message: "the endpoint answered 400 Bad Request" });
    expect(rx.reconciles).toEqual([]);
  });

  it("a github-style claim does not satisfy it (no X-Signature): the style must be generic-hmac", async () => {
    const { rx } = await sendThrough("webapp-gh", "flux-rx-gh", {
      signature: "github",
      key: "receiver-token",
      phase: "Failed",
    });
    expect(rx.reconciles).toEqual([]);
  });
});
