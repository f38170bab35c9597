import { describe, expect, it } from "vitest";
import { API_VERSION, type WebhookClaim } from "../queue/crds/index.js";
import { callbackKeys, signBody } from "../queue/webhook-callback.js";
import { fileWorld } from "../test/support/file-world.js";
import { gatewayWorld } from "../test/support/gateway-world.js";
import { MISS_BODY, MISS_STATUS } from "./answers.js";
import { createGateway } from "./app.js";
import { type CatalogObjects, StaticCatalog } from "./catalog.js";

const KEY = "deployer-hmac-key";
const claim: WebhookClaim = {
  apiVersion: API_VERSION,
  kind: "WebhookClaim",
  metadata: { name: "deployer", namespace: "team-a" },
  spec: {
    url: "https://deploy.example/hook",
    secretRef: { name: "deployer-key", key: "hmacKey" },
    signature: "generic-hmac",
    timeoutSeconds: 30,
    completion: { mode: "callback", budgetSeconds: 300 },
  },
};
const objects = (key = KEY): CatalogObjects => ({
  providers: [],
  targets: [],
  webhookClaims: [claim],
  secrets: [{ namespace: "team-a", name: "deployer-key", data: { hmacKey: key } }],
});

const catalog = new StaticCatalog(objects());
const w = fileWorld(() => gatewayWorld("callbacks", createGateway, { catalog }));

const open = (token: string) =>
  w.redis.client.set(
    callbackKeys(w.redis.prefix, token).record,
    JSON.stringify({ claim: { namespace: "team-a", name: "deployer" }, signature: "generic-hmac" }),
  );
const post = (token: string, body: string, headers: Record<string, string>) =>
  w.gw.app.inject({
    method: "POST",
    url: `/v1/operations/${token}`,
    payload: body,
    headers: { "content-type": "application/json", ...headers },
  });
const reports = async (token: string) =>
  (await w.redis.client.lrange(callbackKeys(w.redis.prefix, token).reports, 0, -1)).map((s) => JSON.parse(s));

describe("POST /v1/operations/{token}", () => {
  it("a report signed with the claim's key is kept for the sidecar, in order (202)", async () => {
    await open("op-1");
    const running = JSON.stringify({ phase: "Running", message: "applying" });
    const done = JSON.stringify({ phase: "Succeeded" });
    expect((await post("op-1", running, { "x-signature": signBody(KEY, running) })).statusCode).toBe(202);
    // The github style's header carries the same signature.
    expect((await post("op-1", done, { "x-hub-signature-256": signBody(KEY, done) })).statusCode).toBe(202);
    expect((await reports("op-1")).map((r) => r.phase)).toEqual(["Running", "Succeeded"]);
  });

  it("a bad signature, an unknown token and a finished one all answer the one miss", async () => {
    await open("op-2");
    const body = JSON.stringify({ phase: "Succeeded" });
    const answers = [
      await post("op-2", body, { "x-signature": signBody("wrong-key", body) }),
      await post("op-2", body, {}),
      await post("op-unknown", body, { "x-signature": signBody(KEY, body) }),
      await w.gw.app.inject({ method: "GET", url: "/no/such/path" }),
    ];
    // Finished: the sidecar closed it.
    await w.redis.client.del(callbackKeys(w.redis.prefix, "op-2").record);
    answers.push(await post("op-2", body, { "x-signature": signBody(KEY, body) }));
    for (const a of answers) {
      expect(a.statusCode).toBe(MISS_STATUS);
      expect(a.body).toBe(MISS_BODY);
      expect(a.headers["content-type"]).toBe(answers[0]!.headers["content-type"]);
    }
    expect(await reports("op-2")).toEqual([]);
  });

  it("a signed body that is not a report is refused by name (400), and changes nothing", async () => {
    await open("op-3");
    const body = JSON.stringify({ phase: "Applied" });
    const r = await post("op-3", body, { "x-signature": signBody(KEY, body) });
    expect(r.statusCode).toBe(400);
    expect(r.json().error).toContain("phase");
    expect(await reports("op-3")).toEqual([]);
  });

  it("checks with the key the Secret holds now (rotation without a restart)", async () => {
    await open("op-4");
    catalog.set(objects("rotated-key"));
    const body = JSON.stringify({ phase: "Failed", message: "x" });
    expect((await post("op-4", body, { "x-signature": signBody(KEY, body) })).statusCode).toBe(MISS_STATUS);
    expect((await post("op-4", body, { "x-signature": signBody("rotated-key", body) })).statusCode).toBe(202);
    catalog.set(objects());
  });
});
