import { Queue } from "bullmq";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AcceptedWrite, branchKey, QUEUES, RefusalNotice } from "../queue/contract.js";
import { branchKeys, knownBranchesKey, publishedChannel, writePublishedKey } from "../queue/keys.js";
import { connectRedis } from "../queue/redis.js";
import { type RestartableRedis, restartableRedis } from "../test/redis/restartable.js";
import { fileWorld } from "../test/support/file-world.js";
import {
  fixtureObjects,
  hmacHex,
  NS,
  SECRETS,
  signedGithubPush,
  URLS,
  webConfigMapWrite,
} from "../test/support/gateway.js";
import { fixtureGatewayOptions, gatewayWorld } from "../test/support/gateway-world.js";
import { until } from "../test/support/wait.js";
import { createGateway, type Gateway } from "./app.js";
import { StaticCatalog } from "./catalog.js";

const WRITES = `/v1/targets/${NS}/infra/writes`;
const REFUSALS = `/v1/targets/${NS}/infra/refusals`;
const BK = branchKey({ namespace: NS, name: "generic" }, URLS.generic, "main");
const bearer = { authorization: `Bearer ${SECRETS.intakeToken}`, "content-type": "application/json" };

const write = webConfigMapWrite("apps", { a: "1" }, "scale web");

describe("intake", () => {
  const w = fileWorld(() => gatewayWorld("intake", createGateway, { maxWaitMs: 5000 }));

  const inbox = async () => {
    const entries = await w.redis.client.xrange(branchKeys(w.redis.prefix, BK).inbox, "-", "+");
    return entries.map(([, fields]) => ({ kind: fields[1], data: JSON.parse(fields[3]!) }));
  };
  /** The id of the write the inbox holds after its first `known` entries, once it is there. */
  const nextWriteId = async (known: number) => {
    const entries = await until(
      async () => {
        const now = await inbox();
        return now.length > known && now;
      },
      "the write in the inbox",
      { timeoutMs: 5000, everyMs: 10 },
    );
    return (entries.at(-1)!.data as { id: string }).id;
  };
  /** Posts the write to `g` with `objects` upserted in place of its own changes. */
  const upsertTo = (g: Gateway, ...objects: unknown[]) =>
    g.app.inject({
      method: "POST",
      url: WRITES,
      headers: bearer,
      payload: { ...write, changes: objects.map((object) => ({ op: "upsert", object })) },
    });

  it("appends an authorised write to its branch inbox and signals the branch", async () => {
    const r = await w.gw.app.inject({ method: "POST", url: WRITES, headers: bearer, payload: write });
    expect(r.statusCode).toBe(202);
    expect(r.json().branchKey).toBe(BK);
    const entries = await inbox();
    expect(entries).toHaveLength(1);
    expect(entries[0]!.kind).toBe("write");
    const accepted = AcceptedWrite.parse(entries[0]!.data);
    expect(accepted).toMatchObject({ id: r.json().id, path: "clusters/infra", target: { name: "infra" } });
    expect(await w.redis.client.sismember(knownBranchesKey(w.redis.prefix), BK)).toBe(1);
    const branches = new Queue(QUEUES.branches, { connection: w.redis.client, prefix: w.redis.prefix });
    const jobs = await branches.getJobs(["waiting"]);
    expect(jobs.map((j) => j.data)).toEqual([{ branchKey: BK }]);
  });

  it("accepts an HMAC-signed write and refuses bad or missing credentials alike", async () => {
    const body = JSON.stringify(write);
    const signed = await w.gw.app.inject({
      method: "POST",
      url: WRITES,
      headers: {
        "content-type": "application/json",
        "x-signature": `sha256=${hmacHex("sha256", SECRETS.intakeHmac, body)}`,
      },
      payload: body,
    });
    expect(signed.statusCode).toBe(202);
    const answers = await Promise.all(
      [
        { url: WRITES, headers: { authorization: "Bearer wrong" } },
        { url: WRITES, headers: {} },
        { url: WRITES, headers: { "x-signature": "sha256=00" } },
        { url: `/v1/targets/${NS}/hello/writes`, headers: bearer }, // target without an intake Secret
        { url: `/v1/targets/${NS}/missing/writes`, headers: bearer },
      ].map((c) =>
        w.gw.app.inject({
          method: "POST",
          url: c.url,
          headers: { "content-type": "application/json", ...c.headers },
          payload: body,
        }),
      ),
    );
    expect(new Set(answers.map((a) => `${a.statusCode} ${a.body}`))).toEqual(
      new Set(['401 {"error":"unauthorized"}']),
    );
  });

  it("answers 400 naming the bad field", async () => {
    const bad = {
      ...write,
      changes: [{ op: "upsert", object: { apiVersion: "v1", metadata: { name: "x" } } }],
    };
    const r = await w.gw.app.inject({ method: "POST", url: WRITES, headers: bearer, payload: bad });
    expect(r.statusCode).toBe(400);
    expect(r.json().error).toMatch(/^changes\.0\.object\.kind: /);
    const noAuthor = await w.gw.app.inject({
      method: "POST",
      url: WRITES,
      headers: bearer,
      payload: { changes: write.changes },
    });
    expect(noAuthor.json().error).toMatch(/^author: Required/);
    const notJson = await w.gw.app.inject({ method: "POST", url: WRITES, headers: bearer, payload: "{" });
    expect(notJson.statusCode).toBe(400);
  });

  it("refuses with 403 a write outside the target's scope, naming the object and the rule, and queues nothing", async () => {
    const before = (await inbox()).length;
    const foreign = {
      ...write,
      changes: [
        write.changes[0],
        {
          op: "upsert",
          object: {
            apiVersion: "v1",
            kind: "ConfigMap",
            metadata: { name: "evil", namespace: "kube-system" },
          },
        },
      ],
    };
    const clusterRole = {
      ...write,
      changes: [
        {
          op: "upsert",
          object: {
            apiVersion: "rbac.authorization.k8s.io/v1",
            kind: "ClusterRole",
            metadata: { name: "escalate" },
            rules: [{ apiGroups: ["*"], resources: ["*"], verbs: ["*"] }],
          },
        },
      ],
    };
    const deleteForeign = {
      ...write,
      changes: [
        { op: "delete", ref: { apiVersion: "v1", kind: "Secret", namespace: "kube-system", name: "s" } },
      ],
    };
    const a = await w.gw.app.inject({ method: "POST", url: WRITES, headers: bearer, payload: foreign });
    expect(a.statusCode).toBe(403);
    expect(a.json()).toMatchObject({
      field: "changes.1",
      object: "ConfigMap kube-system/evil",
      rule: "ForeignNamespace",
    });
    expect(a.json().error).toMatch(/GitTarget apps\/infra holds namespaced objects in apps only/);
    const b = await w.gw.app.inject({ method: "POST", url: WRITES, headers: bearer, payload: clusterRole });
    expect(b.statusCode).toBe(403);
    expect(b.json()).toMatchObject({ object: "ClusterRole escalate", rule: "ClusterScoped" });
    const c = await w.gw.app.inject({ method: "POST", url: WRITES, headers: bearer, payload: deleteForeign });
    expect(c.statusCode).toBe(403);
    expect((await inbox()).length).toBe(before);
    const metrics = await w.gw.metrics.registry.getSingleMetricAsString(
      "applygate_gateway_refused_writes_total",
    );
    expect(metrics).toContain(
      'applygate_gateway_refused_writes_total{target="apps/infra",reason="ForeignNamespace"} 2',
    );
    expect(metrics).toContain(
      'applygate_gateway_refused_writes_total{target="apps/infra",reason="ClusterScoped"} 1',
    );
  });

  it("refuses with 403 a Secret in clear text and a ServiceAccount, as a namespace's scope never holds them, and queues nothing", async () => {
    const before = (await inbox()).length;
    const post = (object: Record<string, unknown>) => upsertTo(w.gw, object);
    const secret = await post({
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "db", namespace: NS },
      stringData: { password: "hunter2" },
    });
    expect(secret.statusCode).toBe(403);
    expect(secret.json()).toMatchObject({
      field: "changes.0",
      object: "Secret apps/db",
      rule: "SecretRefused",
    });
    expect(secret.json().error).toMatch(/a Secret is never written to Git in clear text/);
    const sa = await post({
      apiVersion: "v1",
      kind: "ServiceAccount",
      metadata: { name: "ci", namespace: NS },
    });
    expect(sa.statusCode).toBe(403);
    expect(sa.json()).toMatchObject({ object: "ServiceAccount apps/ci", rule: "PrivilegedKind" });
    expect((await inbox()).length).toBe(before);
  });

  it("refuses with 403 a Pod template beyond its namespace's Pod Security level, and accepts it where the namespace allows it", async () => {
    const before = (await inbox()).length;
    const hostPid = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "debug", namespace: NS },
      spec: {
        hostPID: true,
        containers: [{ name: "sh", image: "busybox", securityContext: { privileged: true } }],
      },
    };
    const daemonSet = {
      apiVersion: "apps/v1",
      kind: "DaemonSet",
      metadata: { name: "agent", namespace: NS },
      spec: { template: { spec: { hostNetwork: true, containers: [{ name: "a", image: "a" }] } } },
    };
    const plain = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "web", namespace: NS },
      spec: { template: { spec: { containers: [{ name: "web", image: "nginx" }] } } },
    };
    // No label on the namespace: baseline.
    const pod = await upsertTo(w.gw, plain, hostPid);
    expect(pod.statusCode).toBe(403);
    expect(pod.json()).toMatchObject({ field: "changes.1", object: "Pod apps/debug", rule: "PodSecurity" });
    expect(pod.json().error).toBe(
      'Pod apps/debug: violates PodSecurity "baseline:latest" of namespace apps: host namespaces (hostPID=true); privileged (container "sh" must not set securityContext.privileged=true)',
    );
    expect((await upsertTo(w.gw, daemonSet)).json()).toMatchObject({
      rule: "PodSecurity",
      object: "DaemonSet apps/agent",
    });
    expect((await inbox()).length).toBe(before);
    expect((await upsertTo(w.gw, plain)).statusCode).toBe(202);

    const labelled = (level: string) =>
      createGateway(
        fixtureGatewayOptions(w.redis, {
          catalog: new StaticCatalog({
            ...fixtureObjects(),
            namespaces: [{ name: NS, labels: { "pod-security.kubernetes.io/enforce": level } }],
          }),
        }),
      );
    const privileged = await labelled("privileged");
    const restricted = await labelled("restricted");
    try {
      expect((await upsertTo(privileged, hostPid)).statusCode).toBe(202);
      const r = await upsertTo(restricted, plain);
      expect(r.statusCode).toBe(403);
      expect(r.json().error).toMatch(/violates PodSecurity "restricted:latest"/);
    } finally {
      await privileged.close();
      await restricted.close();
    }
    const metrics = await w.gw.metrics.registry.getSingleMetricAsString(
      "applygate_gateway_refused_writes_total",
    );
    expect(metrics).toContain(
      'applygate_gateway_refused_writes_total{target="apps/infra",reason="PodSecurity"}',
    );
  });

  it("refuses with 422 naming the field whatever the worker could not store, and queues nothing", async () => {
    const before = (await inbox()).length;
    const post = (object: unknown) => upsertTo(w.gw, object);
    const gitName = await post({
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name: ".git:x" },
    });
    expect(gitName.statusCode).toBe(422);
    expect(gitName.json().field).toBe("changes.0.object.metadata.name");
    for (const name of ["../../../evil", "a/b", "a\u0000b", "..."]) {
      const r = await post({ apiVersion: "v1", kind: "ConfigMap", metadata: { name, namespace: NS } });
      expect(r.statusCode, name).toBe(422);
    }
    let deep: unknown = 1;
    for (let i = 0; i < 1000; i++) deep = { a: deep };
    const nested = await post({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "d", namespace: NS },
      data: deep,
    });
    expect(nested.statusCode).toBe(422);
    expect(nested.json().error).toMatch(/^changes\.0\.object: nested deeper than/);
    expect((await inbox()).length).toBe(before);
  });

  it("keeps a change's base for the worker, and refuses with 422 a base that names another object", async () => {
    const object = write.changes[0]!.object;
    const post = (base: unknown) =>
      w.gw.app.inject({
        method: "POST",
        url: WRITES,
        headers: bearer,
        payload: { ...write, changes: [{ op: "upsert", object, base }] },
      });
    const before = (await inbox()).length;
    const other = await post({ ...object, metadata: { name: "api", namespace: "apps" } });
    expect(other.statusCode).toBe(422);
    expect(other.json().field).toBe("changes.0.base");
    expect((await inbox()).length).toBe(before);
    const ok = await post({ ...object, data: { a: "0" } });
    expect(ok.statusCode).toBe(202);
    const held = AcceptedWrite.parse((await inbox()).at(-1)!.data);
    expect(held.changes[0]).toMatchObject({
      op: "upsert",
      base: { data: { a: "0" } },
      object: { data: { a: "1" } },
    });
  });

  it("answers 4xx, not 503, for a body nested deeper than serializing it allows", async () => {
    const levels = 200_000;
    const body = `{"author":{"name":"a","email":"a@b"},"changes":[{"op":"upsert","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"${NS}"},"data":${"[".repeat(levels)}${"]".repeat(levels)}}}]}`;
    const r = await w.gw.app.inject({ method: "POST", url: WRITES, headers: bearer, payload: body });
    expect(r.statusCode).toBe(422);
  });

  it("fuzz: any write body answers 202, 400, 403 or 422, never 5xx, and only 202 queues", async () => {
    const tricky = fc.constantFrom(..."abz09.-_:~@ \\/\u0000\u200cGIT".split(""));
    const name = fc.oneof(
      fc.string({ unit: tricky, minLength: 1, maxLength: 10 }),
      fc.constantFrom("web", ".git:x", ".."),
    );
    const namespace = fc.option(fc.oneof(name, fc.constant(NS)), { nil: undefined });
    const kind = fc.constantFrom<[string, string]>(
      ["v1", "ConfigMap"],
      ["rbac.authorization.k8s.io/v1", "ClusterRole"],
      ["v1", "Namespace"],
      ["x/y/z", "K"],
    );
    const depth = fc.integer({ min: 0, max: 2000 });
    const change = fc
      .record({ kind, name, namespace, depth, del: fc.boolean() })
      .map(({ kind: [apiVersion, k], name, namespace, depth, del }) => {
        let data: unknown = 1;
        for (let i = 0; i < depth; i++) data = [data];
        const ref = { apiVersion, kind: k, name, ...(namespace !== undefined ? { namespace } : {}) };
        return del
          ? { op: "delete", ref }
          : {
              op: "upsert",
              object: {
                apiVersion,
                kind: k,
                metadata: { name, ...(namespace !== undefined ? { namespace } : {}) },
                data,
              },
            };
      });
    await fc.assert(
      fc.asyncProperty(fc.array(change, { minLength: 1, maxLength: 3 }), async (changes) => {
        const before = (await inbox()).length;
        const r = await w.gw.app.inject({
          method: "POST",
          url: WRITES,
          headers: bearer,
          payload: { ...write, changes },
        });
        expect([202, 400, 403, 422]).toContain(r.statusCode);
        expect((await inbox()).length).toBe(before + (r.statusCode === 202 ? 1 : 0));
      }),
      { numRuns: 150 },
    );
  });

  it("accepts what a ScopeGrant adds, and refuses what the target's allowedKinds leaves out", async () => {
    const objects = fixtureObjects();
    const grant = {
      apiVersion: "applygate.dev/v1alpha1" as const,
      kind: "ScopeGrant" as const,
      metadata: { name: "infra-rbac" },
      spec: {
        targets: [{ namespace: NS, name: "infra" }],
        namespaces: ["kube-system"],
        kinds: [{ group: "rbac.authorization.k8s.io", kind: "ClusterRole" }],
      },
    };
    const granted = await createGateway(
      fixtureGatewayOptions(w.redis, { catalog: new StaticCatalog({ ...objects, grants: [grant] }) }),
    );
    const narrowed = await createGateway(
      fixtureGatewayOptions(w.redis, {
        catalog: new StaticCatalog({
          ...objects,
          targets: objects.targets.map((t) =>
            t.metadata.name === "infra"
              ? { ...t, spec: { ...t.spec, allowedKinds: [{ group: "", kind: "Secret" }] } }
              : t,
          ),
        }),
      }),
    );
    try {
      const cr = {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRole",
        metadata: { name: "reader" },
      };
      const ks = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c", namespace: "kube-system" } };
      expect((await upsertTo(granted, cr)).statusCode).toBe(202);
      expect((await upsertTo(granted, ks)).statusCode).toBe(202);
      const crb = {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRoleBinding",
        metadata: { name: "b" },
      };
      expect((await upsertTo(granted, crb)).statusCode).toBe(403);
      const own = await upsertTo(narrowed, write.changes[0]!.object);
      expect(own.statusCode).toBe(403);
      expect(own.json().rule).toBe("KindNotAllowed");
    } finally {
      await granted.close();
      await narrowed.close();
    }
  });

  it("answers 429 with Retry-After while the worker pauses the branch's intake, and writes nothing", async () => {
    const before = (await inbox()).length;
    await w.redis.client.hset(branchKeys(w.redis.prefix, BK).intake, { paused: "1", retryAfter: "17" });
    const r = await w.gw.app.inject({ method: "POST", url: WRITES, headers: bearer, payload: write });
    expect(r.statusCode).toBe(429);
    expect(r.headers["retry-after"]).toBe("17");
    expect((await inbox()).length).toBe(before);
    await w.redis.client.hdel(branchKeys(w.redis.prefix, BK).intake, "paused");
  });

  it("with wait=published answers the commit the worker published", async () => {
    const known = (await inbox()).length;
    const pending = w.gw.app.inject({
      method: "POST",
      url: `${WRITES}?wait=published`,
      headers: bearer,
      payload: write,
    });
    // Play the worker: find the new write in the inbox, record and announce its publication.
    const commit = "e".repeat(40);
    const id = await nextWriteId(known);
    await w.redis.client.set(writePublishedKey(w.redis.prefix, id!), commit, "EX", 3600);
    await w.redis.client.publish(publishedChannel(w.redis.prefix), JSON.stringify({ id, commit }));
    const r = await pending;
    expect(r.statusCode).toBe(200);
    expect(r.json()).toEqual({ id, branchKey: BK, published: true, commit });
  });

  it("with wait=published answers at once when the worker settles the write as refused", async () => {
    const known = (await inbox()).length;
    const started = Date.now();
    const pending = w.gw.app.inject({
      method: "POST",
      url: `${WRITES}?wait=published&timeout=30`,
      headers: bearer,
      payload: write,
    });
    const id = await nextWriteId(known);
    // What the worker's fenced settle does for a refused write.
    await w.redis.client.set(
      writePublishedKey(w.redis.prefix, id),
      "refused: CommitFailed: boom",
      "EX",
      3600,
    );
    await w.redis.client.publish(
      publishedChannel(w.redis.prefix),
      JSON.stringify({ id, refused: "CommitFailed: boom" }),
    );
    const r = await pending;
    expect(r.statusCode).toBe(422);
    expect(r.json()).toEqual({ id, branchKey: BK, published: false, refused: "CommitFailed: boom" });
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it("with wait=published answers 202 unpublished when the bound passes", async () => {
    const r = await w.gw.app.inject({
      method: "POST",
      url: `${WRITES}?wait=published&timeout=0.2`,
      headers: bearer,
      payload: write,
    });
    expect(r.statusCode).toBe(202);
    expect(r.json().published).toBe(false);
  });

  it("queues a refusal notice, once per Idempotency-Key", async () => {
    const refusal = {
      object: { apiVersion: "v1", kind: "ConfigMap", namespace: "apps", name: "web" },
      reason: "field owned by a policy",
    };
    const headers = { ...bearer, "idempotency-key": "k-1" };
    const a = await w.gw.app.inject({ method: "POST", url: REFUSALS, headers, payload: refusal });
    const b = await w.gw.app.inject({ method: "POST", url: REFUSALS, headers, payload: refusal });
    expect(a.statusCode).toBe(202);
    expect(b.json().id).toBe(a.json().id);
    const notices = new Queue(QUEUES.notices, { connection: w.redis.client, prefix: w.redis.prefix });
    const jobs = await notices.getJobs(["waiting"]);
    expect(jobs).toHaveLength(1);
    expect(RefusalNotice.parse(jobs[0]!.data)).toMatchObject({
      branchKey: BK,
      reason: "field owned by a policy",
    });
    const bad = await w.gw.app.inject({
      method: "POST",
      url: REFUSALS,
      headers: bearer,
      payload: { object: refusal.object },
    });
    expect(bad.json().error).toMatch(/^reason: Required/);
  });

  it("refuses a refusal notice naming an object its GitTarget may not hold, or no storable object, and queues nothing", async () => {
    const notices = new Queue(QUEUES.notices, { connection: w.redis.client, prefix: w.redis.prefix });
    const before = (await notices.getJobs(["waiting"])).length;
    const post = (object: Record<string, unknown>) =>
      w.gw.app.inject({ method: "POST", url: REFUSALS, headers: bearer, payload: { object, reason: "r" } });
    const foreign = await post({ apiVersion: "v1", kind: "ConfigMap", namespace: "kube-system", name: "x" });
    expect(foreign.statusCode).toBe(403);
    expect(foreign.json()).toMatchObject({
      field: "object",
      object: "ConfigMap kube-system/x",
      rule: "ForeignNamespace",
    });
    const cluster = await post({
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      name: "admin",
    });
    expect(cluster.json()).toMatchObject({ rule: "ClusterScoped" });
    const privileged = await post({ apiVersion: "v1", kind: "ServiceAccount", namespace: NS, name: "ci" });
    expect(privileged.json()).toMatchObject({ rule: "PrivilegedKind" });
    const unstorable = await post({ apiVersion: "v1", kind: "ConfigMap", namespace: NS, name: "../x" });
    expect(unstorable.statusCode).toBe(422);
    expect(unstorable.json().field).toBe("object.name");
    expect((await notices.getJobs(["waiting"])).length).toBe(before);
  });

  it("answers 429 to a write that would take a retrying branch past its budget, latching the pause; a refusal notice still passes", async () => {
    const intake = branchKeys(w.redis.prefix, BK).intake;
    const before = (await inbox()).length;
    // What the worker tells the gate during an outage, and what earlier writes were charged.
    await w.redis.client.hset(intake, { retrying: "1", retryAfter: "9", budget: "4096", charged: "3500" });
    const r = await w.gw.app.inject({ method: "POST", url: WRITES, headers: bearer, payload: write });
    expect(r.statusCode).toBe(429);
    expect(r.headers["retry-after"]).toBe("9");
    expect(r.json().error).toBe("intake paused for this branch until retained writes are published");
    expect((await inbox()).length).toBe(before);
    expect(await w.redis.client.hmget(intake, "paused", "charged")).toEqual(["1", "3500"]);
    // A refusal notice for the same branch is not a write: the gate never sees it.
    const notices = new Queue(QUEUES.notices, { connection: w.redis.client, prefix: w.redis.prefix });
    const waiting = (await notices.getJobs(["waiting"])).length;
    const refusal = await w.gw.app.inject({
      method: "POST",
      url: REFUSALS,
      headers: bearer,
      payload: {
        object: { apiVersion: "v1", kind: "ConfigMap", namespace: "apps", name: "web" },
        reason: "field owned by a policy",
      },
    });
    expect(refusal.statusCode).toBe(202);
    expect((await notices.getJobs(["waiting"])).length).toBe(waiting + 1);
    await w.redis.client.del(intake);
  });
});

describe("Redis stopped mid-test", () => {
  // Behind a port held for the whole test: a server restarted on a freed port could be beaten to
  // it by another process on the machine, whose server then answered in its place.
  let redis: RestartableRedis;
  let gw: Gateway;

  beforeAll(async () => {
    redis = await restartableRedis({ persist: false });
    gw = await createGateway(
      fixtureGatewayOptions({ url: redis.url, prefix: "down" }, { redisTimeoutMs: 1000 }),
    );
  });
  afterAll(async () => {
    await gw.close();
    await redis.remove();
  });

  it("answers 503 with Retry-After while Redis is gone, loses nothing, and accepts once it is back", async () => {
    const push = (delivery: string) => gw.app.inject(signedGithubPush(delivery));
    const writeCall = () => gw.app.inject({ method: "POST", url: WRITES, headers: bearer, payload: write });
    expect((await push("before")).statusCode).toBe(202);

    await redis.stop("SIGKILL");
    const during = [await push("during"), await writeCall()];
    for (const r of during) {
      expect(r.statusCode).toBe(503);
      expect(r.headers["retry-after"]).toBe("5");
    }
    expect((await gw.app.inject({ method: "GET", url: "/readyz" })).statusCode).toBe(503);

    await redis.start();
    // Nothing of the refused calls reached the new server (it starts empty: no persistence), not
    // even once the gateway's connection is back: a command sent as the connection dropped (the
    // push above) is not sent again then.
    await until(
      async () => (await gw.app.inject({ method: "GET", url: "/readyz" })).statusCode === 200,
      "the gateway's connection to come back",
      { timeoutMs: 10_000, everyMs: 50 },
    );
    const check = connectRedis(redis.url);
    expect(await check.dbsize()).toBe(0);
    // The gateway's connection comes back on its own: it answers 503 until then.
    const again = await until(
      async () => {
        const r = await push("during");
        return r.statusCode !== 503 && r;
      },
      "the gateway to take pushes again",
      { timeoutMs: 10_000, everyMs: 100 },
    );
    expect(again.statusCode).toBe(202);
    expect((await writeCall()).statusCode).toBe(202);
    const notices = new Queue(QUEUES.notices, { connection: check, prefix: "down" });
    expect(await notices.getJobCounts("waiting").then((c) => c.waiting)).toBe(1);
    expect(await check.xlen(branchKeys("down", BK).inbox)).toBe(1);
    await notices.close();
    check.disconnect();
  });
});
