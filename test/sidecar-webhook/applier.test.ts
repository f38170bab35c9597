/**
 * The webhook applier end to end, as deployed: each rule of docs/webhook-applier.md against a real HTTP
 * endpoint, the simulated API server and Redis.
 */
import { createHmac } from "node:crypto";
import * as k8s from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { RESOURCES } from "../../queue/kube/index.js";
import { callbackKeys } from "../../queue/webhook-callback.js";
import { redisCallbacks } from "../../sidecar/webhook/callbacks.js";
import { fileWorld } from "../support/file-world.js";
import { COMMIT, NS, startWebhookWorld, until } from "./harness.js";

const w = fileWorld(() => startWebhookWorld());

/** Flux's generic-hmac check as its documentation gives it: `X-Signature: <algo>=<hex>`, HMAC of the body. */
function fluxGenericHmacAccepts(key: string, header: string | undefined, body: Buffer): boolean {
  if (!header) return false;
  const [algo, hex] = header.split("=");
  if (!algo || !hex || !["sha1", "sha256", "sha512"].includes(algo)) return false;
  return createHmac(algo, key).update(body).digest("hex") === hex;
}

/** applygate_operations_unresolved{applier_kind="webhook"} as the sidecar's /metrics says it. */
const unresolvedGauge = async () => {
  const line = (await w.sidecar.metrics.text())
    .split("\n")
    .find((l) => l.startsWith('applygate_operations_unresolved{applier_kind="webhook"}'));
  return Number(line?.split(" ").at(-1));
};

const report = (token: string, phase: string, message?: string) =>
  w.redis.client.rpush(
    callbackKeys(w.redis.prefix, token).reports,
    JSON.stringify({ phase, ...(message ? { message } : {}), receivedAt: new Date().toISOString() }),
  );

/** The endpoint takes each request for later (202 "queued"): mode callback's Running. */
const answerQueued = () =>
  w.endpoint.handle((_r, res) => {
    res.statusCode = 202;
    res.end("queued");
  });
/** The endpoint's usual answer, 200 "applied", put back after a test that changed it. */
const answerApplied = () => w.endpoint.handle((_r, res) => res.end("applied"));

describe("mode response", () => {
  it("a 2xx within the timeout is Succeeded; the request carries the body, a delivery id, the token and a generic-hmac signature Flux accepts", async () => {
    await w.createClaim("resp", { url: `${w.endpoint.url}/deploy` }, "k-resp");
    const before = w.endpoint.received.length;
    const a = await w.send("resp");
    await w.reaches("resp", "Succeeded");
    const req = w.endpoint.received[before]!;
    expect(req.path).toBe("/deploy");
    expect(req.body).toEqual({
      repository: "https://git.example/org/repo.git",
      branch: "main",
      commit: COMMIT,
      reason: "CatchUp",
      token: a.token,
      claim: { namespace: NS, name: "resp" },
    });
    expect(req.headers["x-applygate-token"]).toBe(a.token);
    expect(req.headers["x-applygate-delivery"]).toMatch(/^[0-9a-f-]{36}$/);
    expect(fluxGenericHmacAccepts("k-resp", req.headers["x-signature"] as string, req.raw)).toBe(true);
    expect(fluxGenericHmacAccepts("other", req.headers["x-signature"] as string, req.raw)).toBe(false);
    await w.queues.reported(a.token, "Succeeded");
    expect(await w.queues.phases(a.token)).toEqual(["Requested", "Succeeded"]);
    const claim = await w.claim("resp");
    expect((claim?.status as { lastAppliedCommit?: string } | undefined)?.lastAppliedCommit).toBe(COMMIT);
    // Finished: the token takes no report any longer.
    expect(await w.redis.client.exists(callbackKeys(w.redis.prefix, a.token).record)).toBe(0);
  });

  it("a non-2xx answer is Failed with its status only: nothing of its body reaches the claim, its Events or its reports", async () => {
    const secret = "aws_secret_access_key=wJalrXUtnFEMI-not-for-the-namespace";
    w.endpoint.handle((_r, res) => {
      res.statusCode = 500;
      res.end(`kubectl apply failed: ${secret}`);
    });
    const a = await w.send("resp");
    await w.reaches("resp", "Failed", a.token);
    const op = await w.operation("resp");
    expect(op?.outcome).toBe("HTTP500");
    expect(op?.message).toBe("the endpoint answered 500 Internal Server Error");
    await w.queues.reported(a.token, "Failed");
    expect(JSON.stringify(await w.claim("resp"))).not.toContain("wJalrXUtnFEMI");
    expect(JSON.stringify(await w.queues.reports(a.token))).not.toContain("wJalrXUtnFEMI");
    const ofThis = async () =>
      (await w.kube.list<{ note?: string }>(RESOURCES.event, NS)).items.filter((e) =>
        e.note?.includes(a.token),
      );
    await until(async () => (await ofThis()).length > 0, "the operation's Event");
    for (const e of await ofThis()) {
      expect(e.note).toContain("HTTP500: the endpoint answered 500 Internal Server Error");
      expect(e.note).not.toContain("wJalrXUtnFEMI");
    }
    answerApplied();
  });

  it("a redirect is never followed: a 3xx is Failed and its Location is never called", async () => {
    const before = w.endpoint.received.length;
    w.endpoint.handle((r, res) => {
      if (r.path === "/elsewhere") return res.end("followed");
      res.statusCode = 307;
      res.setHeader("location", `${w.endpoint.url}/elsewhere`);
      res.end();
    });
    const a = await w.send("resp");
    await w.reaches("resp", "Failed", a.token);
    expect((await w.operation("resp"))?.outcome).toBe("HTTP307");
    expect(w.endpoint.received.slice(before).map((r) => r.path)).toEqual(["/deploy"]);
  });

  it("no answer within the timeout is Failed (Timeout), and the request is not sent again", async () => {
    await w.createClaim("slow", { url: `${w.endpoint.url}/slow`, timeoutSeconds: 1 });
    const before = w.endpoint.received.length;
    w.endpoint.handle(() => {}); // never answers
    const a = await w.send("slow");
    await w.reaches("slow", "Failed");
    expect((await w.operation("slow"))?.outcome).toBe("Timeout");
    expect(w.endpoint.received.length - before).toBe(1);
    await w.queues.reported(a.token, "Failed");
    answerApplied();
  });

  it("signs with the github style in X-Hub-Signature-256", async () => {
    await w.createClaim("gh", { url: `${w.endpoint.url}/gh`, signature: "github" }, "k-gh");
    const before = w.endpoint.received.length;
    await w.send("gh");
    await w.reaches("gh", "Succeeded");
    const req = w.endpoint.received[before]!;
    const expected = `sha256=${createHmac("sha256", "k-gh").update(req.raw).digest("hex")}`;
    expect(req.headers["x-hub-signature-256"]).toBe(expected);
    expect(req.headers["x-signature"]).toBeUndefined();
    expect(req.headers["x-github-event"]).toBe("push");
  });

  it("a rotated key signs the next request, without a restart", async () => {
    await w.setKey("gh", "k-gh-rotated");
    // The Secret is watched: wait until the next request carries the new key's signature.
    await until(async () => {
      const before = w.endpoint.received.length;
      const a = await w.send("gh");
      await w.reaches("gh", "Succeeded", a.token);
      const req = w.endpoint.received[before]!;
      return (
        req.headers["x-hub-signature-256"] ===
        `sha256=${createHmac("sha256", "k-gh-rotated").update(req.raw).digest("hex")}`
      );
    }, "signed with the rotated key");
  });
});

describe("mode callback", () => {
  it("a 2xx is Running; the tool's reports move it and its Succeeded ends it", async () => {
    await w.createClaim("cb", { url: `${w.endpoint.url}/cb`, mode: "callback" });
    answerQueued();
    const a = await w.send("cb");
    await w.reaches("cb", "Running");
    expect(await w.redis.client.exists(callbackKeys(w.redis.prefix, a.token).record)).toBe(1);
    await report(a.token, "Running", "applying 3 objects");
    await until(async () => (await w.operation("cb"))?.message === "applying 3 objects", "progress");
    await report(a.token, "Succeeded", "applied");
    await w.reaches("cb", "Succeeded");
    await w.queues.reported(a.token, "Succeeded");
    expect(await w.queues.phases(a.token)).toEqual(["Requested", "Running", "Running", "Succeeded"]);
    expect(await w.redis.client.exists(callbackKeys(w.redis.prefix, a.token).record)).toBe(0);
    answerApplied();
  });

  it("a reported Failed ends it Failed", async () => {
    const a = await w.send("cb");
    await w.reaches("cb", "Running", a.token);
    await report(a.token, "Failed", "helm upgrade failed");
    await w.reaches("cb", "Failed");
    expect((await w.operation("cb"))?.message).toBe("helm upgrade failed");
  });

  it("without a report within the budget it is Unresolved, still followed, and a late report ends it", async () => {
    await w.createClaim("quiet", { url: `${w.endpoint.url}/quiet`, mode: "callback", budgetSeconds: 1 });
    const a = await w.send("quiet");
    await w.reaches("quiet", "Unresolved");
    await w.queues.reported(a.token, "Unresolved");
    expect(w.sidecar.executor.running()).toContain(a.token);
    // The same gauge and Event as the other kinds.
    expect(await unresolvedGauge()).toBe(1);
    const event = await until(
      async () =>
        (
          await w.api.kubeConfig().makeApiClient(k8s.EventsV1Api).listNamespacedEvent({ namespace: NS })
        ).items.find((e) => e.reason === "OperationUnresolved" && e.regarding?.name === "quiet"),
      "the OperationUnresolved Event",
    );
    expect(event).toMatchObject({ type: "Warning", action: "Follow", regarding: { kind: "WebhookClaim" } });
    expect(event.note).toContain(a.token);
    await report(a.token, "Succeeded", "done at last");
    await w.reaches("quiet", "Succeeded");
    // The gauge moves when the phase is reported, just after the claim's status is written.
    await until(async () => (await unresolvedGauge()) === 0, "the gauge back at 0");
  });
});

describe("restart", () => {
  it("a request cut by a stop is Unresolved; the next process follows it and never sends it again", async () => {
    await w.createClaim("rs", { url: `${w.endpoint.url}/rs`, mode: "callback" });
    w.endpoint.handle(() => {}); // the answer never comes before the stop
    const before = w.endpoint.received.length;
    const a = await w.send("rs");
    await until(() => w.endpoint.received.length > before, "request under way");
    await w.sidecar.stop();
    expect((await w.operation("rs"))?.phase).toBe("Unresolved");
    await w.restart();
    await until(() => w.sidecar.executor.running().includes(a.token), "followed by the next process");
    await report(a.token, "Succeeded", "it had applied");
    await w.reaches("rs", "Succeeded");
    expect(w.endpoint.received.length - before).toBe(1);
    answerApplied();
  });

  it("an operation a crashed process left Requested is Unresolved after the restart, followed, not sent again", async () => {
    await w.sidecar.stop();
    const before = w.endpoint.received.length;
    const token = "op-crashed";
    // What a process killed between the record and the answer leaves on the claim.
    const claim = await w.claim("rs");
    const target = ((await w.operation("rs"))?.targets ?? [])[0]!;
    await w.kube.patchStatus(
      RESOURCES.webhookClaim,
      NS,
      "rs",
      {
        operation: {
          token,
          phase: "Requested",
          commit: COMMIT,
          targets: [target],
          requestedAt: new Date().toISOString(),
        },
      },
      claim!.metadata.resourceVersion,
    );
    await w.restart();
    await w.reaches("rs", "Unresolved");
    expect((await w.operation("rs"))?.message).toContain("not sent again");
    await report(token, "Failed", "it had failed");
    await w.reaches("rs", "Failed");
    expect(w.endpoint.received.length).toBe(before);
  });
});

describe("the claim's status failing after the request (soak --mirror seed 101021)", () => {
  // A 409 storm on applygate.dev writes met the write of a reported Succeeded: the executor threw,
  // the host reported RequestFailed for a request the tool had carried out, the report was already
  // taken, and the record, left Running, was recovered and followed as Unresolved for good while
  // every later attempt was refused OperationInFlight.
  const statusPath = (claim: string) =>
    `/apis/applygate.dev/v1alpha1/namespaces/${NS}/webhookclaims/${claim}/status`;

  it("the end is written again until it lands: Succeeded once, recorded, the next attempt runs", async () => {
    await w.createClaim("storm", { url: `${w.endpoint.url}/storm`, mode: "callback" });
    answerQueued();
    const a = await w.send("storm");
    await w.reaches("storm", "Running");
    w.api.faults.failNext(12, { pathPrefix: statusPath("storm"), status: 409 });
    await report(a.token, "Succeeded", "applied");
    await w.reaches("storm", "Succeeded");
    await w.queues.reported(a.token, "Succeeded");
    expect(w.api.faults.pending(statusPath("storm"))).toBe(0);
    expect(await w.queues.phases(a.token)).toEqual(["Requested", "Running", "Succeeded"]);
    const next = await w.send("storm");
    await until(async () => (await w.operation("storm"))?.token === next.token, "the next attempt recorded");
    await report(next.token, "Succeeded", "applied");
    await w.queues.reported(next.token, "Succeeded");
    answerApplied();
  });

  it("a stop while the end cannot be written leaves the report for the next process, which ends it", async () => {
    await w.createClaim("halt", { url: `${w.endpoint.url}/halt`, mode: "callback" });
    answerQueued();
    const before = w.endpoint.received.length;
    const a = await w.send("halt");
    await w.reaches("halt", "Running");
    const refusals = 10_000;
    w.api.faults.failNext(refusals, { pathPrefix: statusPath("halt"), status: 500 });
    await report(a.token, "Succeeded", "applied");
    await until(() => w.api.faults.pending(statusPath("halt")) < refusals - 2, "the end written and refused");
    await w.sidecar.stop();
    w.api.faults.reset();
    expect((await w.operation("halt"))?.phase).toBe("Running");
    await w.restart();
    await w.reaches("halt", "Succeeded");
    await w.queues.reported(a.token, "Succeeded");
    const phases = await w.queues.phases(a.token);
    expect(phases.filter((p) => p === "Succeeded")).toHaveLength(1);
    expect(phases).not.toContain("RequestFailed");
    expect(w.endpoint.received.length - before).toBe(1);
    answerApplied();
  });
});

describe("a failure before the request", () => {
  it("ends RequestFailed (NotSent): nothing sent, the record withdrawn, and the next attempt runs (soak --mirror seed 51029)", async () => {
    await w.createClaim("unsent", { url: `${w.endpoint.url}/unsent`, mode: "callback" });
    await w.sidecar.stop();
    // Redis goes away just as the report channel is opened, before the request: what ioredis
    // answers then. Once only: the next attempt finds Redis back.
    const real = redisCallbacks(w.redis.client, w.redis.prefix);
    let away = 1;
    await w.restart({
      callbacks: {
        ...real,
        async open(token, record) {
          if (away-- > 0) throw new Error("Reached the max retries per request limit (which is 1).");
          return real.open(token, record);
        },
      },
    });
    try {
      const before = w.endpoint.received.length;
      const a = await w.send("unsent");
      await w.queues.reported(a.token, "RequestFailed");
      expect((await w.queues.reports(a.token)).at(-1)).toMatchObject({
        phase: "RequestFailed",
        reason: "NotSent",
      });
      expect(w.endpoint.received.length).toBe(before);
      // The record is withdrawn: no operation stays in flight for recovery to take as sent.
      await until(async () => (await w.operation("unsent")) === undefined, "the record withdrawn");
      // The next attempt is sent and runs, not refused OperationInFlight.
      const b = await w.send("unsent");
      await w.queues.reported(b.token, "Running");
      await report(b.token, "Succeeded", "applied");
      await w.reaches("unsent", "Succeeded");
      expect(w.endpoint.received.length - before).toBe(1);
    } finally {
      await w.sidecar.stop();
      await w.restart();
    }
  });
});

describe("conditions", () => {
  it("a claim whose key Secret is missing is not Ready (SecretNotFound) until the Secret exists", async () => {
    await w.api.applyYaml(`
apiVersion: applygate.dev/v1alpha1
kind: WebhookClaim
metadata: {name: nokey, namespace: ${NS}}
spec: {url: "${w.endpoint.url}/nokey", insecure: true, secretRef: {name: nokey-key}}
---
apiVersion: applygate.dev/v1alpha1
kind: GitTarget
metadata: {name: nokey-target, namespace: ${NS}}
spec: {providerRef: {name: repo}, branch: main, path: apps/nokey, claimRef: {kind: WebhookClaim, name: nokey}}
`);
    const ready = async () =>
      (
        (await w.claim("nokey"))?.status as
          | { conditions?: { type: string; status: string; reason: string }[] }
          | undefined
      )?.conditions?.find((c) => c.type === "Ready");
    await until(async () => (await ready())?.reason === "SecretNotFound", "Ready Unknown: SecretNotFound");
    expect((await ready())?.status).toBe("Unknown");
    await w.setKey("nokey", "now-there");
    await until(async () => (await ready())?.status === "True", "Ready once the Secret exists");
  });
});

describe("SSRF", () => {
  it("without --webhook-allow-internal a loopback endpoint is refused and never called", async () => {
    await w.sidecar.stop();
    await w.restart({ allowInternal: false });
    const before = w.endpoint.received.length;
    /** An attempt for `claim`, refused as AddressRefused naming `why`; the endpoint is never called. */
    const refused = async (claim: string, why: string) => {
      const a = await w.send(claim);
      await w.queues.reported(a.token, "RequestFailed");
      const r = (await w.queues.reports(a.token)).find((x) => x.phase === "RequestFailed");
      expect(r?.reason).toBe("AddressRefused");
      expect(r?.message).toContain(why);
      expect(w.endpoint.received.length).toBe(before);
      return a;
    };
    const a = await refused("resp", "loopback");
    // Nothing started: the record is taken back.
    expect((await w.operation("resp"))?.token).not.toBe(a.token);

    // The same listener named as IPv4-mapped IPv6, which the URL parser rewrites to [::ffff:7f00:1].
    const port = new URL(w.endpoint.url).port;
    await w.createClaim("mapped", { url: `http://[::ffff:127.0.0.1]:${port}/deploy` });
    await refused("mapped", "IPv4-mapped 127.0.0.1, loopback");
    await w.sidecar.stop();
    await w.restart();
  });
});
