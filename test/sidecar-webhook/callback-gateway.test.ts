/**
 * The callback path as deployed: a tool answers 202, then reports through the gateway (its
 * cluster catalog under the gateway's ServiceAccount, reading the WebhookClaim and its Secret)
 * and the webhook applier ends the operation from that report.
 */
import { describe, expect, it } from "vitest";
import { MISS_STATUS } from "../../gateway/answers.js";
import { type StartedGateway, startGateway } from "../../gateway/app.js";
import { ClusterCatalog } from "../../gateway/catalog-cluster.js";
import { signBody } from "../../queue/webhook-callback.js";
import { secretReaderYaml } from "../playground/demo.js";
import { deployedIdentities } from "../playground/identities.js";
import { fileWorld } from "../support/file-world.js";
import { NS, startWebhookWorld, until } from "./harness.js";

let gw: StartedGateway;
const w = fileWorld(async () => {
  const w = await startWebhookWorld();
  const sa = deployedIdentities().serviceAccounts.gateway;
  await w.api.applyYaml(secretReaderYaml(NS, [sa]));
  const catalog = await ClusterCatalog.start({
    kubeConfig: w.api.kubeConfig(w.api.addServiceAccount(sa.namespace, sa.name)),
    secretRefreshMs: 200,
    writeStatus: false,
  });
  w.onStop(() => catalog.close());
  gw = await startGateway({
    redisUrl: w.redis.url,
    prefix: w.redis.prefix,
    catalog,
    queueEvents: false,
    processMetrics: false,
  });
  w.onStop(() => gw.close());
  return w;
});

describe("callback through the gateway", () => {
  it("the tool's signed Succeeded ends the operation; a report after the end is a miss", async () => {
    await w.createClaim(
      "tool",
      { url: `${w.endpoint.url}/tool`, mode: "callback", signature: "github" },
      "tool-key",
    );
    w.endpoint.handle((_r, res) => {
      res.statusCode = 202;
      res.end();
    });
    const a = await w.send("tool");
    await w.reaches("tool", "Running");
    const post = (body: string, key: string) =>
      fetch(`${gw.url}/v1/operations/${a.token}`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-hub-signature-256": signBody(key, body) },
        body,
      });
    const done = JSON.stringify({ phase: "Succeeded", message: "deployed by the tool" });
    expect((await post(done, "not-the-key")).status).toBe(MISS_STATUS);
    // The gateway reads the claim's Secret by name once it sees the claim.
    await until(async () => (await post(done, "tool-key")).status === 202, "report accepted");
    await w.reaches("tool", "Succeeded");
    expect((await w.operation("tool"))?.message).toBe("deployed by the tool");
    expect((await post(done, "tool-key")).status).toBe(MISS_STATUS);
    w.endpoint.handle((_r, res) => res.end("applied"));
  });
});
