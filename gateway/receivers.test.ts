import { Queue } from "bullmq";
import fc from "fast-check";
import type { LightMyRequestResponse } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { branchKey, PushNotice, QUEUES } from "../queue/contract.js";
import { noticeJobId } from "../queue/intake.js";
import { branchKeys } from "../queue/keys.js";
import { connectRedis } from "../queue/redis.js";
import { fileWorld } from "../test/support/file-world.js";
import {
  branchPushExample,
  githubPushExamples,
  hmacHex,
  NS,
  pathOf,
  SECRETS,
  URLS,
} from "../test/support/gateway.js";
import { gatewayWorld } from "../test/support/gateway-world.js";
import { createGateway, MISS_BODY, MISS_STATUS } from "./app.js";
import { verifyDelivery } from "./verify.js";

const w = fileWorld(() => gatewayWorld("recv", createGateway, { bodyLimit: 64 * 1024 }));
let notices: Queue;

beforeAll(() => {
  notices = new Queue(QUEUES.notices, { connection: connectRedis(w.redis.url), prefix: w.redis.prefix });
});

afterAll(async () => {
  await notices.close();
});

type Headers = Record<string, string>;
const post = (url: string, body: string | Buffer, headers: Headers = {}) =>
  w.gw.app.inject({
    method: "POST",
    url,
    payload: body,
    headers: { "content-type": "application/json", ...headers },
  });

async function jobCount(): Promise<number> {
  const c = await notices.getJobCounts("waiting", "active", "delayed", "completed", "failed", "prioritized");
  return Object.values(c).reduce((a, b) => a + (b ?? 0), 0);
}

function githubHeaders(
  secret: string,
  body: string,
  event = "push",
  delivery: string = crypto.randomUUID(),
): Headers {
  return {
    "x-github-event": event,
    "x-github-delivery": delivery,
    "x-hub-signature-256": `sha256=${hmacHex("sha256", secret, body)}`,
  };
}

/** The parts of an answer a caller could compare: status, body and every header except Date. */
function fingerprint(r: LightMyRequestResponse): string {
  const { date: _d, ...headers } = r.headers;
  return JSON.stringify({ status: r.statusCode, body: r.body, headers });
}

describe("GitHub receiver", () => {
  it("accepts GitHub's published signature vector", async () => {
    const headers = {
      "x-github-event": "push",
      "x-hub-signature-256": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
    };
    const vector = { type: "github" as const, secret: SECRETS.vector, allowSha1: false, headers };
    expect(await verifyDelivery({ ...vector, body: Buffer.from("Hello, World!") })).toBe(true);
    expect(await verifyDelivery({ ...vector, body: Buffer.from("Hello, World?") })).toBe(false);
    // The vector signs a body that is not JSON: at the receiver it is a miss before any check.
    const r = await post(pathOf(SECRETS.vector, "vector"), "Hello, World!", headers);
    expect(r.statusCode).toBe(MISS_STATUS);
  });

  it("queues a recorded branch push as a normalised push notice, once per delivery", async () => {
    const body = JSON.stringify(branchPushExample());
    const headers = githubHeaders(SECRETS.github, body, "push", "delivery-1");
    const r = await post(pathOf(SECRETS.github, "github"), body, headers);
    expect(r.statusCode).toBe(202);
    const { id } = r.json();
    const job = await notices.getJob(id);
    const notice = PushNotice.parse(job!.data);
    expect(notice).toMatchObject({
      provider: { namespace: "apps", name: "github" },
      deliveryId: "delivery-1",
      branch: "master",
      after: branchPushExample().after,
      deleted: false,
      forced: false,
      branchKeys: [branchKey({ namespace: NS, name: "github" }, URLS.github, "master")],
    });
    expect(notice.repository).toContain("github.com/Codertocat/Hello-World");
    expect(id).toBe(noticeJobId(notice));
    // Redelivery of the same delivery id: same job, nothing new.
    const before = await jobCount();
    const again = await post(pathOf(SECRETS.github, "github"), body, headers);
    expect(again.statusCode).toBe(202);
    expect(again.json().id).toBe(id);
    expect(await jobCount()).toBe(before);
  });

  it("queues a push for a branch whose intake is paused over its budget: notices never pass the intake gate", async () => {
    const intake = branchKeys(
      w.redis.prefix,
      branchKey({ namespace: NS, name: "github" }, URLS.github, "master"),
    ).intake;
    await w.redis.client.hset(intake, { paused: "1", retrying: "1", budget: "1", charged: "999999" });
    try {
      const body = JSON.stringify(branchPushExample());
      const r = await post(pathOf(SECRETS.github, "github"), body, githubHeaders(SECRETS.github, body));
      expect(r.statusCode).toBe(202);
      const job = await notices.getJob(r.json().id);
      expect(PushNotice.parse(job!.data).branchKeys).toEqual([
        branchKey({ namespace: NS, name: "github" }, URLS.github, "master"),
      ]);
    } finally {
      await w.redis.client.del(intake);
    }
  });

  it("answers tags 200 and queues nothing; answers ping 200", async () => {
    const before = await jobCount();
    for (const example of githubPushExamples().filter((e) => String(e.ref).startsWith("refs/tags/"))) {
      const body = JSON.stringify(example);
      const r = await post(pathOf(SECRETS.github, "github"), body, githubHeaders(SECRETS.github, body));
      expect(r.statusCode).toBe(200);
    }
    const ping = JSON.stringify({ zen: "Keep it logically awesome.", hook_id: 1 });
    const p = await post(pathOf(SECRETS.github, "github"), ping, githubHeaders(SECRETS.github, ping, "ping"));
    expect(p.statusCode).toBe(200);
    expect(await jobCount()).toBe(before);
  });

  it("answers 202 and drops a push for a branch no GitTarget writes", async () => {
    const before = await jobCount();
    const body = JSON.stringify({ ...branchPushExample(), ref: "refs/heads/feature" });
    const r = await post(pathOf(SECRETS.github, "github"), body, githubHeaders(SECRETS.github, body));
    expect(r.statusCode).toBe(202);
    expect(r.json().status).toBe("ignored");
    expect(await jobCount()).toBe(before);
  });

  it("accepts a form-encoded delivery, signed over the form bytes", async () => {
    const payload = JSON.stringify(branchPushExample());
    const body = `payload=${encodeURIComponent(payload)}`;
    const r = await post(pathOf(SECRETS.github, "github"), body, {
      ...githubHeaders(SECRETS.github, body),
      "content-type": "application/x-www-form-urlencoded",
    });
    expect(r.statusCode).toBe(202);
  });

  it("accepts a sha1 signature only when the provider allows it", async () => {
    const body = JSON.stringify(branchPushExample());
    const sha1 = {
      "x-github-event": "push",
      "x-hub-signature": `sha1=${hmacHex("sha1", "legacy-token", body)}`,
    };
    const allowed = await post(pathOf("legacy-token", "legacy"), body, sha1);
    expect(allowed.statusCode).toBe(202); // legacy has no GitTarget: verified, then dropped
    const refused = await post(pathOf(SECRETS.github, "github"), body, {
      "x-github-event": "push",
      "x-hub-signature": `sha1=${hmacHex("sha1", SECRETS.github, body)}`,
    });
    expect(refused.statusCode).toBe(MISS_STATUS);
  });
});

describe("other hosts", () => {
  const giteaPush = (after: string) => ({
    ref: "refs/heads/main",
    before: "0".repeat(40),
    after,
    compare_url: "",
    commits: [],
    total_commits: 0,
    repository: {
      full_name: "team/app",
      clone_url: "http://gitea.local:3000/team/app.git",
      html_url: "http://gitea.local:3000/team/app",
      ssh_url: "git@gitea.local:team/app.git",
      default_branch: "main",
    },
    pusher: { login: "dev" },
  });

  it("accepts a Gitea delivery with Gitea's headers (bare hex signature)", async () => {
    const body = JSON.stringify(giteaPush("a".repeat(40)));
    const sig = hmacHex("sha256", SECRETS.gitea, body);
    const r = await post(pathOf(SECRETS.gitea, "gitea"), body, {
      "x-gitea-event": "push",
      "x-gitea-event-type": "push",
      "x-gitea-delivery": "5b4b2f0e-gitea",
      "x-gitea-signature": sig,
      "x-gogs-signature": sig,
    });
    expect(r.statusCode).toBe(202);
    const notice = PushNotice.parse((await notices.getJob(r.json().id))!.data);
    expect(notice).toMatchObject({ branch: "main", deliveryId: "5b4b2f0e-gitea", deleted: false });
    expect(notice.repository).toContain("gitea.local:3000/team/app");
  });

  it("accepts a Gitea delivery at a github-type provider through its GitHub headers", async () => {
    const body = JSON.stringify({
      ...giteaPush("b".repeat(40)),
      repository: { clone_url: URLS.github, html_url: "https://github.com/Codertocat/Hello-World" },
      ref: "refs/heads/master",
    });
    const r = await post(pathOf(SECRETS.github, "github"), body, {
      "x-gitea-event": "push",
      "x-github-event": "push",
      "x-gitea-delivery": "gitea-as-github",
      "x-gitea-signature": hmacHex("sha256", SECRETS.github, body),
      "x-hub-signature-256": `sha256=${hmacHex("sha256", SECRETS.github, body)}`,
    });
    expect(r.statusCode).toBe(202);
  });

  it("accepts a GitLab Push Hook with the right token, and a branch deletion as deleted", async () => {
    const body = JSON.stringify({
      object_kind: "push",
      ref: "refs/heads/main",
      before: "c".repeat(40),
      after: "0".repeat(40),
      checkout_sha: null,
      project: {
        git_http_url: "https://gitlab.example.com/group/app.git",
        git_ssh_url: "git@gitlab.example.com:group/app.git",
        web_url: "https://gitlab.example.com/group/app",
      },
    });
    const r = await post(pathOf(SECRETS.gitlab, "gitlab"), body, {
      "x-gitlab-event": "Push Hook",
      "x-gitlab-token": SECRETS.gitlab,
      "x-gitlab-event-uuid": "gl-1",
    });
    expect(r.statusCode).toBe(202);
    const notice = PushNotice.parse((await notices.getJob(r.json().id))!.data);
    expect(notice).toMatchObject({ deleted: true, branch: "main", deliveryId: "gl-1" });
  });

  it("accepts generic-hmac with sha1, sha256 and sha512, for both body shapes", async () => {
    const generic = JSON.stringify({ repository: URLS.generic, branch: "main", after: "d".repeat(40) });
    for (const algo of ["sha1", "sha256", "sha512"] as const) {
      const r = await post(pathOf(SECRETS.generic, "generic"), generic, {
        "x-signature": `${algo}=${hmacHex(algo, SECRETS.generic, generic)}`,
      });
      expect(r.statusCode, algo).toBe(202);
    }
    const githubShaped = JSON.stringify({
      ...branchPushExample(),
      ref: "refs/heads/main",
      repository: { clone_url: URLS.generic },
    });
    const r = await post(pathOf(SECRETS.generic, "generic"), githubShaped, {
      "x-signature": `sha256=${hmacHex("sha256", SECRETS.generic, githubShaped)}`,
    });
    expect(r.statusCode).toBe(202);
  });

  it("answers 413 for a body over the limit", async () => {
    const big = Buffer.alloc(65 * 1024, "a");
    const r = await post(
      pathOf(SECRETS.github, "github"),
      big,
      githubHeaders(SECRETS.github, big.toString()),
    );
    expect(r.statusCode).toBe(413);
  });
});

describe("verified events that are not a push", () => {
  // A host sends these when a hook is created or when more events than push are ticked; a 404
  // shows as a failed delivery there, and some hosts disable a hook that keeps failing.
  const body = JSON.stringify({ zen: "Keep it logically awesome.", hook_id: 1 });
  const cases: [string, string, Headers][] = [
    ["GitHub ping", pathOf(SECRETS.github, "github"), githubHeaders(SECRETS.github, body, "ping")],
    ["GitHub issues", pathOf(SECRETS.github, "github"), githubHeaders(SECRETS.github, body, "issues")],
    [
      "Gitea ping",
      pathOf(SECRETS.gitea, "gitea"),
      { "x-gitea-event": "ping", "x-gitea-signature": hmacHex("sha256", SECRETS.gitea, body) },
    ],
    [
      "Gitea create",
      pathOf(SECRETS.gitea, "gitea"),
      { "x-gitea-event": "create", "x-gitea-signature": hmacHex("sha256", SECRETS.gitea, body) },
    ],
    [
      "GitLab tag push",
      pathOf(SECRETS.gitlab, "gitlab"),
      { "x-gitlab-event": "Tag Push Hook", "x-gitlab-token": SECRETS.gitlab },
    ],
    [
      "generic-hmac ping",
      pathOf(SECRETS.generic, "generic"),
      { "x-github-event": "ping", "x-signature": `sha256=${hmacHex("sha256", SECRETS.generic, body)}` },
    ],
  ];

  it.each(cases)("answers a verified %s 200 ignored, and queues nothing", async (_label, url, headers) => {
    const before = await jobCount();
    const r = await post(url, body, headers);
    expect(r.statusCode).toBe(200);
    expect(r.json()).toEqual({ status: "ignored", detail: "not a push event" });
    expect(await jobCount()).toBe(before);
  });

  it.each(cases)("answers an unverified %s the uniform miss", async (_label, url, headers) => {
    const forged = { ...headers };
    for (const h of ["x-hub-signature-256", "x-gitea-signature", "x-signature"])
      if (forged[h]) forged[h] = forged[h]!.replace(/[0-9a-f]{8}$/, "00000000");
    if (forged["x-gitlab-token"]) forged["x-gitlab-token"] = "not-the-token";
    const r = await post(url, body, forged);
    expect(r.statusCode).toBe(MISS_STATUS);
    expect(r.body).toBe(MISS_BODY);
  });
});

describe("misses", () => {
  const body = JSON.stringify(branchPushExample());
  const good = githubHeaders(SECRETS.github, body);
  const gh = pathOf(SECRETS.github, "github");
  const table: [string, string, Headers, string?][] = [
    ["unknown path", `/hook/${"0".repeat(64)}`, good],
    ["path that is not a hash", "/hook/nope", good],
    ["missing signature", gh, { "x-github-event": "push" }],
    ["wrong signature", gh, { ...good, "x-hub-signature-256": `sha256=${"0".repeat(64)}` }],
    ["signature with another secret", gh, githubHeaders("other", body)],
    ["malformed signature", gh, { ...good, "x-hub-signature-256": "sha256=zz" }],
    [
      "sha1 where not allowed",
      gh,
      { "x-github-event": "push", "x-hub-signature": `sha1=${hmacHex("sha1", SECRETS.github, body)}` },
    ],
    ["an event that is not a push, unsigned", gh, { "x-github-event": "issues" }],
    ["provider not ready (no Secret)", pathOf("", "nosecret"), good],
    [
      "gitlab wrong token",
      pathOf(SECRETS.gitlab, "gitlab"),
      { "x-gitlab-event": "Push Hook", "x-gitlab-token": "x" },
    ],
    [
      "gitlab tag push event with a wrong token",
      pathOf(SECRETS.gitlab, "gitlab"),
      { "x-gitlab-event": "Tag Push Hook", "x-gitlab-token": "x" },
    ],
    [
      "gitea bare signature wrong",
      pathOf(SECRETS.gitea, "gitea"),
      { "x-gitea-event": "push", "x-gitea-signature": "00" },
    ],
    [
      "generic unknown algorithm",
      pathOf(SECRETS.generic, "generic"),
      { "x-signature": `md5=${hmacHex("sha1", SECRETS.generic, body)}` },
    ],
    ["GET on a receiver", gh, good, "GET"],
    ["unknown route", "/anything", good],
  ];

  it("answers every miss with the same bytes and queues nothing", async () => {
    const before = await jobCount();
    const prints = new Set<string>();
    for (const [label, url, headers, method] of table) {
      const r = await w.gw.app.inject({
        method: (method as "GET") ?? "POST",
        url,
        headers: { "content-type": "application/json", ...headers },
        ...(method === "GET" ? {} : { payload: body }),
      });
      expect(r.statusCode, label).toBe(MISS_STATUS);
      expect(r.body, label).toBe(MISS_BODY);
      prints.add(fingerprint(r));
    }
    expect([...prints]).toHaveLength(1);
    expect(await jobCount()).toBe(before);
  });

  it("random headers and bodies never 5xx, never enqueue, never crash", async () => {
    const before = await jobCount();
    const paths = [
      gh,
      pathOf(SECRETS.gitlab, "gitlab"),
      pathOf(SECRETS.generic, "generic"),
      pathOf(SECRETS.gitea, "gitea"),
      "/hook/x",
    ];
    const headerName = fc.constantFrom(
      "x-hub-signature-256",
      "x-hub-signature",
      "x-github-event",
      "x-gitea-signature",
      "x-gitea-event",
      "x-gitlab-token",
      "x-gitlab-event",
      "x-signature",
      "content-type",
      "content-encoding",
      "x-github-delivery",
    );
    const headerValue = fc.oneof(
      fc.string({ maxLength: 80 }).map((s) => s.replace(/[^\x20-\x7e]/g, "")),
      fc.constantFrom(
        "push",
        "ping",
        "Push Hook",
        "sha256=",
        "sha1=00",
        "application/x-www-form-urlencoded",
        "gzip",
      ),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...paths),
        fc.dictionary(headerName, headerValue, { maxKeys: 6 }),
        fc.oneof(
          fc.uint8Array({ maxLength: 2048 }).map((a) => Buffer.from(a)),
          fc.json().map((s) => Buffer.from(s)),
          // Deep nesting, invalid UTF-8 after a JSON start, and a form with a broken payload.
          fc
            .integer({ min: 1, max: 100_000 })
            .map((n) => Buffer.from(`{"a":${"[".repeat(n)}${"]".repeat(n)}}`)),
          fc
            .uint8Array({ maxLength: 512 })
            .map((a) => Buffer.concat([Buffer.from('{"ref":"'), Buffer.from(a)])),
          fc.string({ maxLength: 200 }).map((s) => Buffer.from(`payload=${s}`)),
        ),
        async (url, headers, payload) => {
          const r = await w.gw.app.inject({ method: "POST", url, headers, payload });
          expect(r.statusCode).toBeLessThan(500);
        },
      ),
      { numRuns: 300 },
    );
    expect(await jobCount()).toBe(before);
  });
});

describe("metrics", () => {
  it("counts deliveries by provider type and outcome and exposes the queue gauges", async () => {
    const r = await w.gw.app.inject({ method: "GET", url: "/metrics" });
    expect(r.statusCode).toBe(200);
    expect(r.body).toMatch(
      /applygate_gateway_deliveries_total\{provider_type="github",outcome="accepted"\} [1-9]/,
    );
    expect(r.body).toMatch(
      /applygate_gateway_deliveries_total\{provider_type="unknown",outcome="miss"\} [1-9]/,
    );
    expect(r.body).toMatch(/applygate_queue_jobs\{queue="notices",state="completed"\} 0/);
    expect(r.body).toMatch(/applygate_queue_oldest_waiting_seconds\{queue="notices"\} \d/);
    expect(r.body).toMatch(
      /http_request_duration_seconds_count\{method="POST",route="\/hook\/:id",status_code="202"\}/,
    );
  });

  it("answers /healthz and /readyz", async () => {
    expect((await w.gw.app.inject({ method: "GET", url: "/healthz" })).statusCode).toBe(200);
    const ready = await w.gw.app.inject({ method: "GET", url: "/readyz" });
    expect(ready.statusCode).toBe(200);
    expect(ready.json()).toEqual({ redis: true, catalog: true });
  });
});
