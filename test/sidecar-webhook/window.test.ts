/**
 * The apply window of a webhook endpoint: while its operation runs, writes made by the claim's
 * field managers are reported to the branch worker as the applier's own (so a late one over a
 * newer edit becomes a Repair, queue/decide); writes by any other manager are edits, not reported.
 */

import { describe, expect, it } from "vitest";
import type { ApplierWriteReport } from "../../queue/contract.js";
import { memoryReporter } from "../../sidecar/reporter.js";
import { WebhookWindowObserver } from "../../sidecar/webhook/observer.js";
import { fileWorld } from "../support/file-world.js";
import { NS, startWebhookWorld, until } from "./harness.js";

const w = fileWorld(() => startWebhookWorld({ windowGraceMs: 200 }));

const applyConfigMap = async (name: string, value: string, manager: string) => {
  const res = await fetch(
    `${w.api.url}/api/v1/namespaces/${NS}/configmaps/${name}?fieldManager=${manager}&force=true`,
    {
      method: "PATCH",
      headers: { "content-type": "application/apply-patch+yaml", authorization: `Bearer ${w.api.token()}` },
      body: JSON.stringify({
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name, namespace: NS },
        data: { value },
      }),
    },
  );
  if (!res.ok) throw new Error(`apply ${name}: ${res.status} ${await res.text()}`);
};

describe("the webhook applier's apply window", () => {
  it("reports the deployer's own writes during the operation, and no other manager's", async () => {
    await w.createClaim("win", { url: `${w.endpoint.url}/win` });
    // The deployer applies under its field manager, then answers; meanwhile somebody edits another object.
    w.endpoint.handle((_r, res) => {
      void (async () => {
        await applyConfigMap("deployed", "v1", "playground-deployer");
        await applyConfigMap("edited", "hand", "kubectl-edit");
        res.end("applied");
      })();
    });
    const a = await w.send("win");
    await w.reaches("win", "Succeeded");
    await until(
      async () => (await w.queues.applierWrites(a.token)).length > 0,
      "the deployer's write reported",
    );
    const writes = await w.queues.applierWrites(a.token);
    expect(writes.map((r) => [r.object.name, r.manager])).toEqual([["deployed", "playground-deployer"]]);
    expect(writes[0]?.claim).toEqual({ kind: "WebhookClaim", namespace: NS, name: "win" });
    w.endpoint.handle((_r, res) => res.end("applied"));
  });

  it("a window opened again by a new process reports the tool's write made while nobody watched, and no older one (soak seed 152052)", async () => {
    const startedAt = new Date().toISOString();
    // The tool applies while no process watches.
    await applyConfigMap("unwatched", "v1", "playground-deployer");
    const reporter = memoryReporter();
    const observer = await w.startObserver(WebhookWindowObserver, reporter);
    const window = (token: string, missedSince: string) =>
      observer.open({
        token,
        claim: { kind: "WebhookClaim", namespace: NS, name: "win" },
        applier: { namespace: NS, name: "win" },
        branchKey: "git/r@main",
        managers: ["playground-deployer"],
        missedSince,
      });
    const reported = (token: string) =>
      reporter.reports.filter((x): x is ApplierWriteReport => x.type === "applierWrite" && x.token === token);
    try {
      // An operation that started after the write: the write is older, never its apply.
      window("later", new Date(Date.now() + 5_000).toISOString());
      window("again", startedAt);
      const write = await until(
        async () => reported("again").find((x) => x.object.name === "unwatched"),
        "the unwatched write reported",
      );
      expect(write).toMatchObject({
        manager: "playground-deployer",
        object: { kind: "ConfigMap", namespace: NS },
      });
      expect(reported("later")).toEqual([]);
    } finally {
      await observer.stop();
    }
  });
});
