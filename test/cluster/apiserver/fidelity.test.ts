/**
 * Fidelity: the requests of GitOps Reverser's mutation-capture lab, made to the simulated API
 * server, answered with the structural facts a real API server (k3s v1.36.1) gave in that lab's
 * corpus: watch event types and order, managedFields entries (manager, operation, subresource,
 * owned fields), resourceVersion movement, the answer's shape and code, and the audit log's verb,
 * objectRef and code. Timestamps, uids and the audit log's request/response bodies (the lab logged
 * at level RequestResponse, ours logs Metadata) are not compared.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { untilWith } from "../../support/wait.js";
import { type ApiServer, type AuditEvent, readAuditLog, startApiServer } from "./index.js";

const until = untilWith({ timeoutMs: 10_000, everyMs: 10 });
const label = "mutationlab.configbutler.ai/scenario";
type Obj = {
  kind?: string;
  metadata: Record<string, any>;
  data?: Record<string, string>;
  spec?: any;
  status?: any;
  [k: string]: unknown;
};
type Event = { type: string; object: Obj };

let server: ApiServer;
let dir: string;
let auditPath: string;
let token: string;
let ns: string;
let n = 0;
/** The audit log's length when a watch was last settled: its marker write is not the scenario's. */
let auditEnd: number | undefined;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "apiserver-fidelity-"));
  auditPath = join(dir, "audit.log");
  server = await startApiServer({ auditLog: auditPath, bookmarkIntervalMs: 50, watchCacheSize: 1000 });
  token = server.kubeConfig().getCurrentUser()!.token!;
});
afterAll(async () => {
  await server?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** One request, as client-go sends it (User-Agent e2e.test, as in the lab). */
async function call(method: string, path: string, body?: unknown, contentType = "application/json") {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: {
      Authorization: `Bearer ${token}`,
      "User-Agent": "e2e.test/v0.0.0 (linux/amd64) kubernetes/$Format",
      ...(body !== undefined ? { "Content-Type": contentType } : {}),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { code: res.status, body: (await res.json()) as Obj };
}

const cms = () => `/api/v1/namespaces/${ns}/configmaps`;
const cm = (name: string, extra: Partial<Obj["metadata"]> = {}) => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name, namespace: ns, labels: { [label]: "s" }, ...extra },
  data: { key: "value" },
});

const deployments = () => `/apis/apps/v1/namespaces/${ns}/deployments`;
const pausedDeployment = {
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "d1", labels: { [label]: "s" } },
  spec: {
    replicas: 0,
    paused: true,
    selector: { matchLabels: { app: "d1" } },
    template: {
      metadata: { labels: { app: "d1" } },
      spec: { containers: [{ name: "c", image: "busybox:1.36", command: ["sleep", "3600"] }] },
    },
  },
};

/** A watch from the current resourceVersion; `events` fills as they arrive. */
function watch(path: string, query = "") {
  const events: Event[] = [];
  const abort = new AbortController();
  const rv = server.resourceVersion();
  const done = (async () => {
    const res = await fetch(`${server.url}${path}?watch=true&resourceVersion=${rv}${query}`, {
      headers: { Authorization: `Bearer ${token}` },
      signal: abort.signal,
    });
    const decoder = new TextDecoder();
    let buf = "";
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buf += decoder.decode(chunk, { stream: true });
      let i = buf.indexOf("\n");
      while (i >= 0) {
        events.push(JSON.parse(buf.slice(0, i)) as Event);
        buf = buf.slice(i + 1);
        i = buf.indexOf("\n");
      }
    }
  })().catch(() => undefined);
  return {
    events,
    /** Everything up to a marker write made now: what the watch saw before it, in order. */
    async settle(): Promise<Event[]> {
      const marker = `marker-${++n}`;
      auditEnd = readAuditLog(auditPath).length;
      const kind = path.endsWith("/deployments") ? pausedDeployment : { apiVersion: "v1", kind: "ConfigMap" };
      await call("POST", path, { ...kind, metadata: { name: marker } });
      await until(() => events.some((e) => e.object.metadata?.name === marker), "the marker's event");
      const before = events.slice(
        0,
        events.findIndex((e) => e.object.metadata?.name === marker),
      );
      return before.filter((e) => e.type !== "BOOKMARK");
    },
    stop: async () => {
      abort.abort();
      await done;
    },
  };
}

const managers = (o: Obj) =>
  (o.metadata.managedFields as { manager: string; operation: string; subresource?: string }[]).map((e) =>
    [e.manager, e.operation, e.subresource ?? ""].join("/"),
  );
const fieldsOf = (o: Obj, manager: string, subresource = "") =>
  (o.metadata.managedFields as { manager: string; subresource?: string; fieldsV1: unknown }[]).find(
    (e) => e.manager === manager && (e.subresource ?? "") === subresource,
  )?.fieldsV1;

/** The audit lines of this scenario's namespace since the mark. */
function auditSince(mark: number): AuditEvent[] {
  return readAuditLog(auditPath)
    .slice(mark, auditEnd)
    .filter((e) => e.objectRef?.namespace === ns && e.verb !== "watch");
}

beforeEach(async () => {
  auditEnd = undefined;
  ns = `lab-${++n}`;
  await call("POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
});

const createdFields = {
  "f:data": { ".": {}, "f:key": {} },
  "f:metadata": { "f:labels": { ".": {}, [`f:${label}`]: {} } },
};

describe("fidelity with a real API server (mutation-capture lab corpus)", () => {
  it("create: one ADDED, one Update entry owning what it set (containers with '.'), audit create 201", async () => {
    const mark = readAuditLog(auditPath).length;
    const w = watch(cms());
    const res = await call("POST", cms(), cm("cm-a"));
    expect(res.code).toBe(201);
    const seen = await w.settle();
    await w.stop();
    expect(seen.map((e) => e.type)).toEqual(["ADDED"]);
    const o = seen[0]!.object;
    expect(managers(o)).toEqual(["e2e.test/Update/"]);
    expect(fieldsOf(o, "e2e.test")).toEqual(createdFields);
    expect(o.metadata.resourceVersion).toBe(res.body.metadata.resourceVersion);
    // A real server also names the object created (from the body) in objectRef.name; ours does not.
    const audit = auditSince(mark);
    expect(audit.map((e) => [e.verb, e.responseStatus.code])).toEqual([["create", 201]]);
    expect(audit[0]!.objectRef).toMatchObject({ resource: "configmaps", namespace: ns, apiVersion: "v1" });
  });

  it("generateName create: the audit objectRef has no name, the answer and the owned fields do", async () => {
    const mark = readAuditLog(auditPath).length;
    const res = await call("POST", cms(), cm("", { generateName: "cm-gen-" }));
    expect(res.code).toBe(201);
    expect(res.body.metadata.name).toMatch(/^cm-gen-[a-z0-9]{5}$/);
    const got = await call("GET", `${cms()}/${res.body.metadata.name}?`);
    const fields = fieldsOf(JSON.parse(JSON.stringify(got.body)) as Obj, "e2e.test") as Record<
      string,
      Record<string, unknown>
    >;
    expect(fields["f:metadata"]!["f:generateName"]).toEqual({});
    const [audit] = auditSince(mark);
    expect(audit).toMatchObject({ verb: "create", responseStatus: { code: 201 } });
    expect(audit!.objectRef?.name).toBeUndefined();
  });

  it("update (PUT): one MODIFIED, resourceVersion moves, the Update entry stays one", async () => {
    const created = (await call("POST", cms(), cm("cm-a"))).body;
    const mark = readAuditLog(auditPath).length;
    const w = watch(cms());
    created.data = { key: "updated" };
    const res = await call("PUT", `${cms()}/cm-a`, created);
    expect(res.code).toBe(200);
    const seen = await w.settle();
    await w.stop();
    expect(seen.map((e) => e.type)).toEqual(["MODIFIED"]);
    expect(Number(seen[0]!.object.metadata.resourceVersion)).toBeGreaterThan(
      Number(created.metadata.resourceVersion),
    );
    expect(managers(seen[0]!.object)).toEqual(["e2e.test/Update/"]);
    expect(fieldsOf(seen[0]!.object, "e2e.test")).toEqual(createdFields);
    expect(auditSince(mark).map((e) => [e.verb, e.objectRef?.name, e.responseStatus.code])).toEqual([
      ["update", "cm-a", 200],
    ]);
  });

  const apply = (name: string, value: string) =>
    call(
      "PATCH",
      `${cms()}/${name}?fieldManager=mutationlab-apply&force=true`,
      { ...cm(name), data: { key: value } },
      "application/apply-patch+yaml",
    );

  it("server-side apply: one MODIFIED, a single Apply entry owning the applied fields without '.'", async () => {
    expect((await apply("cm-a", "value")).code).toBe(201);
    const mark = readAuditLog(auditPath).length;
    const w = watch(cms());
    const res = await apply("cm-a", "updated");
    expect(res.code).toBe(200);
    const seen = await w.settle();
    await w.stop();
    expect(seen.map((e) => e.type)).toEqual(["MODIFIED"]);
    expect(managers(seen[0]!.object)).toEqual(["mutationlab-apply/Apply/"]);
    expect(fieldsOf(seen[0]!.object, "mutationlab-apply")).toEqual({
      "f:data": { "f:key": {} },
      "f:metadata": { "f:labels": { [`f:${label}`]: {} } },
    });
    expect(auditSince(mark).map((e) => [e.verb, e.objectRef?.name, e.responseStatus.code])).toEqual([
      ["patch", "cm-a", 200],
    ]);
  });

  it("no-op apply: no watch event, resourceVersion unchanged, still audited as patch 200", async () => {
    const first = (await apply("cm-a", "value")).body;
    const mark = readAuditLog(auditPath).length;
    const w = watch(cms());
    const again = await apply("cm-a", "value");
    expect(again.code).toBe(200);
    expect(again.body.metadata.resourceVersion).toBe(first.metadata.resourceVersion);
    expect(await w.settle()).toEqual([]);
    await w.stop();
    expect(auditSince(mark).map((e) => [e.verb, e.responseStatus.code])).toEqual([["patch", 200]]);
  });

  it("status subresource: MODIFIED with an Update entry under subresource status; generation stays", async () => {
    expect((await call("POST", deployments(), pausedDeployment)).code).toBe(201);
    // The deployment controller has written status before (k3s in the lab; here by hand).
    await call(
      "PATCH",
      `${deployments()}/d1/status?fieldManager=k3s`,
      { status: { terminatingReplicas: 0 } },
      "application/merge-patch+json",
    );
    const w = watch(deployments());
    const res = await call(
      "PATCH",
      `${deployments()}/d1/status`,
      { status: { observedGeneration: 99 } },
      "application/merge-patch+json",
    );
    expect(res.code).toBe(200);
    const seen = await w.settle();
    await w.stop();
    expect(seen.map((e) => e.type)).toEqual(["MODIFIED"]);
    const o = seen[0]!.object;
    expect(o.metadata.generation).toBe(1);
    expect(o.status.observedGeneration).toBe(99);
    expect(managers(o)).toEqual(["e2e.test/Update/", "k3s/Update/status", "e2e.test/Update/status"]);
    expect(fieldsOf(o, "e2e.test", "status")).toEqual({ "f:status": { "f:observedGeneration": {} } });
  });

  it("scale subresource: a Scale answer, generation 2, replicas owned under subresource scale", async () => {
    expect((await call("POST", deployments(), pausedDeployment)).code).toBe(201);
    const mark = readAuditLog(auditPath).length;
    const w = watch(deployments());
    const res = await call(
      "PATCH",
      `${deployments()}/d1/scale`,
      { spec: { replicas: 2 } },
      "application/merge-patch+json",
    );
    expect(res.code).toBe(200);
    expect(res.body).toMatchObject({
      apiVersion: "autoscaling/v1",
      kind: "Scale",
      metadata: { name: "d1", namespace: ns },
      spec: { replicas: 2 },
      status: { replicas: 0, selector: "app=d1" },
    });
    const seen = await w.settle();
    await w.stop();
    expect(seen.map((e) => e.type)).toEqual(["MODIFIED"]);
    const o = seen[0]!.object;
    expect(o.metadata.generation).toBe(2);
    expect(o.spec.replicas).toBe(2);
    // (k3s lists the scale entry first; the order of entries carries no meaning)
    expect(managers(o).sort()).toEqual(["e2e.test/Update/", "e2e.test/Update/scale"]);
    expect(fieldsOf(o, "e2e.test", "scale")).toEqual({ "f:spec": { "f:replicas": {} } });
    expect(
      o.metadata.managedFields.find((e: { subresource?: string }) => e.subresource === "scale").apiVersion,
    ).toBe("apps/v1");
    const main = fieldsOf(o, "e2e.test") as { "f:spec": Record<string, unknown> };
    expect(main["f:spec"]["f:replicas"]).toBeUndefined();
    expect(auditSince(mark).map((e) => [e.verb, e.objectRef, e.responseStatus.code])).toEqual([
      [
        "patch",
        {
          resource: "deployments",
          subresource: "scale",
          namespace: ns,
          name: "d1",
          apiGroup: "apps",
          apiVersion: "v1",
        },
        200,
      ],
    ]);
  });

  it("finalizer delete: MODIFIED with deletionTimestamp, then the finalizer patch, DELETED as last stored", async () => {
    const hold = "mutationlab.configbutler.ai/hold";
    await call("POST", cms(), cm("cm-hold", { finalizers: [hold] }));
    const mark = readAuditLog(auditPath).length;
    const w = watch(cms());
    const del = await call("DELETE", `${cms()}/cm-hold`);
    expect(del.code).toBe(200);
    expect(del.body.metadata).toMatchObject({ deletionGracePeriodSeconds: 0, finalizers: [hold] });
    expect(del.body.metadata.deletionTimestamp).toBeDefined();
    const patch = await call(
      "PATCH",
      `${cms()}/cm-hold`,
      { metadata: { finalizers: null } },
      "application/merge-patch+json",
    );
    expect(patch.code).toBe(200);
    // The patch answers what it wrote, at the resourceVersion the deletion stamped.
    expect(patch.body.metadata.finalizers).toBeUndefined();
    expect(patch.body.metadata.resourceVersion).toBe(del.body.metadata.resourceVersion);
    const seen = await w.settle();
    await w.stop();
    expect(seen.map((e) => e.type)).toEqual(["MODIFIED", "DELETED"]);
    const [pending, deleted] = seen as [Event, Event];
    expect(pending.object.metadata.deletionTimestamp).toBeDefined();
    expect(pending.object.metadata.resourceVersion).toBe(del.body.metadata.resourceVersion);
    expect(Number(deleted.object.metadata.resourceVersion)).toBeGreaterThan(
      Number(pending.object.metadata.resourceVersion),
    );
    expect(deleted.object.metadata.finalizers).toEqual([hold]);
    expect(managers(deleted.object)).toEqual(["e2e.test/Update/"]);
    expect(auditSince(mark).map((e) => [e.verb, e.responseStatus.code])).toEqual([
      ["delete", 200],
      ["patch", 200],
    ]);
  });

  it("deletecollection: one DELETED per object in order, one name-less audit line, a List answer", async () => {
    for (const name of ["cm-a", "cm-b", "cm-c"]) await call("POST", cms(), cm(name));
    const mark = readAuditLog(auditPath).length;
    const w = watch(cms());
    const res = await call("DELETE", `${cms()}?labelSelector=${encodeURIComponent(`${label}=s`)}`);
    expect(res.code).toBe(200);
    expect(res.body.kind).toBe("ConfigMapList");
    expect((res.body.items as Obj[]).map((o) => o.metadata.name)).toEqual(["cm-a", "cm-b", "cm-c"]);
    const seen = await w.settle();
    await w.stop();
    expect(seen.map((e) => [e.type, e.object.metadata.name])).toEqual([
      ["DELETED", "cm-a"],
      ["DELETED", "cm-b"],
      ["DELETED", "cm-c"],
    ]);
    const rvs = seen.map((e) => Number(e.object.metadata.resourceVersion));
    expect([...rvs].sort((a, b) => a - b)).toEqual(rvs);
    const audit = auditSince(mark);
    expect(audit.map((e) => [e.verb, e.responseStatus.code])).toEqual([["deletecollection", 200]]);
    expect(audit[0]!.objectRef).toEqual({ resource: "configmaps", namespace: ns, apiVersion: "v1" });
  });

  it("owner-reference cascade: the owner's delete answers a Success Status; owner then dependent DELETED", async () => {
    const parent = (await call("POST", cms(), cm("cm-parent"))).body;
    const ownerReferences = [
      { apiVersion: "v1", kind: "ConfigMap", name: "cm-parent", uid: parent.metadata.uid },
    ];
    await call("POST", cms(), cm("cm-child", { ownerReferences }));
    const w = watch(cms());
    const res = await call("DELETE", `${cms()}/cm-parent`, {
      apiVersion: "v1",
      kind: "DeleteOptions",
      propagationPolicy: "Background",
    });
    expect(res).toEqual({
      code: 200,
      body: {
        kind: "Status",
        apiVersion: "v1",
        metadata: {},
        status: "Success",
        details: { name: "cm-parent", group: "", kind: "configmaps", uid: parent.metadata.uid },
      },
    });
    const seen = await w.settle();
    await w.stop();
    expect(seen.map((e) => [e.type, e.object.metadata.name])).toEqual([
      ["DELETED", "cm-parent"],
      ["DELETED", "cm-child"],
    ]);
  });

  it("dry-run create: 201 with a uid and no resourceVersion, nothing stored, no event, audited", async () => {
    const mark = readAuditLog(auditPath).length;
    const w = watch(cms());
    const res = await call("POST", `${cms()}?dryRun=All`, cm("cm-dry"));
    expect(res.code).toBe(201);
    expect(res.body.metadata.uid).toBeDefined();
    expect(res.body.metadata.creationTimestamp).toBeDefined();
    expect(res.body.metadata.resourceVersion).toBeUndefined();
    expect(await w.settle()).toEqual([]);
    await w.stop();
    expect((await call("GET", `${cms()}/cm-dry`)).code).toBe(404);
    expect(auditSince(mark).map((e) => [e.verb, e.responseStatus.code])).toEqual([["create", 201]]);
  });

  it("optimistic-concurrency conflict: 409 Conflict Status, no event, audited as update 409", async () => {
    const created = (await call("POST", cms(), cm("cm-conflict"))).body;
    const stale = structuredClone(created);
    created.data = { key: "winner" };
    expect((await call("PUT", `${cms()}/cm-conflict`, created)).code).toBe(200);
    const mark = readAuditLog(auditPath).length;
    const w = watch(cms());
    stale.data = { key: "loser" };
    const res = await call("PUT", `${cms()}/cm-conflict`, stale);
    expect(res).toEqual({
      code: 409,
      body: {
        kind: "Status",
        apiVersion: "v1",
        metadata: {},
        status: "Failure",
        message:
          'Operation cannot be fulfilled on configmaps "cm-conflict": the object has been modified; please apply your changes to the latest version and try again',
        reason: "Conflict",
        details: { name: "cm-conflict", group: "", kind: "configmaps" },
        code: 409,
      },
    });
    expect(await w.settle()).toEqual([]);
    await w.stop();
    expect(auditSince(mark).map((e) => [e.verb, e.responseStatus.code])).toEqual([["update", 409]]);
  });

  it("watch bookmark: a BOOKMARK carries only the kind and a resourceVersion", async () => {
    await call("POST", cms(), cm("cm-bookmark"));
    const w = watch(cms(), "&allowWatchBookmarks=true");
    const bookmark = await until(() => w.events.find((e) => e.type === "BOOKMARK"), "a bookmark");
    await w.stop();
    expect(bookmark.object.kind).toBe("ConfigMap");
    expect(bookmark.object.metadata.resourceVersion).toMatch(/^\d+$/);
    expect(Object.keys(bookmark.object).sort()).toEqual(["apiVersion", "kind", "metadata"]);
  });

  it("watch from a compacted resourceVersion: one ERROR with a 410 Expired Status, then a relist works", async () => {
    await call("POST", cms(), cm("cm-resync"));
    const old = server.resourceVersion();
    await call("POST", cms(), cm("cm-later"));
    server.faults.expireHistory();
    const res = await fetch(`${server.url}${cms()}?watch=true&resourceVersion=${old}`, {
      headers: { Authorization: `Bearer ${token}` },
    });
    const lines = (await res.text()).trim().split("\n");
    expect(lines).toHaveLength(1);
    const event = JSON.parse(lines[0]!) as Event;
    expect(event.type).toBe("ERROR");
    expect(event.object).toMatchObject({ kind: "Status", status: "Failure", code: 410, reason: "Expired" });
    const list = await call("GET", `${cms()}?labelSelector=${encodeURIComponent(`${label}=s`)}`);
    expect((list.body.items as Obj[]).map((o) => o.metadata.name)).toEqual(["cm-later", "cm-resync"]);
  });
});
