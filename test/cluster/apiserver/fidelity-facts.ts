/**
 * Fidelity: the requests of GitOps Reverser's mutation-capture lab, answered with the structural
 * facts a real API server gave in that lab's corpus (k3s v1.36.1): watch event types and order,
 * managedFields entries (manager, operation, subresource, owned fields), resourceVersion movement,
 * the answer's shape and code, and the audit log's verb, objectRef and code. Timestamps, uids and
 * the audit log's request/response bodies are not compared.
 *
 * Written once and run against two backends: the simulated API server (fidelity.test.ts, the
 * default suite) and a real kube-apiserver with etcd (test/real/apiserver-fidelity.real.test.ts).
 * Where the two differ, the simulator is wrong (test/real/RESULTS.md lists what was found).
 */
import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { untilWith } from "../../support/wait.js";
import { type AuditEvent, readAuditLog } from "./audit.js";

export interface FidelityBackend {
  /** http://… (simulated) or https://… (real). */
  url: string;
  /** The API server's CA bundle (PEM), for https. */
  ca?: string;
  /** A bearer token of a cluster administrator. */
  token: string;
  auditLogPath: string;
  /**
   * A resourceVersion a watch can no longer start from: older than the change history the
   * server keeps. `recent` is a resourceVersion the test saw a moment ago.
   */
  expiredResourceVersion(recent: string): Promise<string>;
  stop(): Promise<void>;
}

export interface FidelityFactsOptions {
  backend: "simulated" | "real";
  start: () => Promise<FidelityBackend>;
  /** How long one condition may take here. */
  timeoutMs: number;
  /** Skips the whole set (the real binaries are not built): `start` is never called. */
  skip?: boolean;
}

const label = "mutationlab.configbutler.ai/scenario";
/** client-go's User-Agent in the lab; the markers a watch is settled with send another one. */
const LAB_AGENT = "e2e.test/v0.0.0 (linux/amd64) kubernetes/$Format";
const MARKER_AGENT = "fidelity-marker";

type Obj = {
  kind?: string;
  metadata: Record<string, any>;
  data?: Record<string, string>;
  spec?: any;
  status?: any;
  [k: string]: unknown;
};
type Event = { type: string; object: Obj };

interface Answer {
  code: number;
  res: IncomingMessage;
}

/** One HTTP request over node:http(s), so a backend's own CA can be trusted without a global. */
function send(
  b: FidelityBackend,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
  signal?: AbortSignal,
): Promise<Answer> {
  const url = new URL(path, b.url);
  const request = url.protocol === "https:" ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers, ...(b.ca ? { ca: b.ca } : {}), signal }, (res) =>
      resolve({ code: res.statusCode ?? 0, res }),
    );
    req.on("error", reject);
    req.end(body);
  });
}

async function text(res: IncomingMessage): Promise<string> {
  let out = "";
  for await (const chunk of res) out += chunk;
  return out;
}

export function describeFidelityFacts(opts: FidelityFactsOptions): void {
  const until = untilWith({ timeoutMs: opts.timeoutMs, everyMs: 10 });

  describe.skipIf(opts.skip ?? false)(`API server fidelity (${opts.backend})`, () => {
    let b: FidelityBackend;
    let ns: string;
    let n = 0;

    beforeAll(async () => {
      b = await opts.start();
    });
    afterAll(async () => {
      await b?.stop();
    });

    /** One request, as client-go sends it (User-Agent e2e.test, as in the lab). */
    async function call(
      method: string,
      path: string,
      body?: unknown,
      contentType = "application/json",
      agent = LAB_AGENT,
    ) {
      const data = body === undefined ? undefined : JSON.stringify(body);
      const { code, res } = await send(
        b,
        method,
        path,
        {
          Authorization: `Bearer ${b.token}`,
          "User-Agent": agent,
          Accept: "application/json",
          ...(data !== undefined
            ? { "Content-Type": contentType, "Content-Length": String(Buffer.byteLength(data)) }
            : {}),
        },
        data,
      );
      return { code, body: JSON.parse(await text(res)) as Obj };
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

    /** The collection's resourceVersion now (a list's), where a watch starts. */
    const listRv = async (path: string): Promise<string> =>
      (await call("GET", `${path}?limit=1`, undefined, undefined, MARKER_AGENT)).body.metadata
        .resourceVersion;

    /** A watch from the current resourceVersion; `events` fills as they arrive. */
    async function watch(path: string, query = "") {
      const events: Event[] = [];
      const abort = new AbortController();
      open.add(abort);
      const rv = await listRv(path);
      const answer = await send(
        b,
        "GET",
        `${path}?watch=true&resourceVersion=${rv}${query}`,
        { Authorization: `Bearer ${b.token}`, "User-Agent": MARKER_AGENT },
        undefined,
        abort.signal,
      );
      const done = (async () => {
        let buf = "";
        for await (const chunk of answer.res) {
          buf += chunk;
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
          const kind = path.endsWith("/deployments")
            ? pausedDeployment
            : { apiVersion: "v1", kind: "ConfigMap" };
          await call("POST", path, { ...kind, metadata: { name: marker } }, undefined, MARKER_AGENT);
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

    /** The real server writes entries sorted: operation, time to the second, manager, version, subresource. */
    const expectServerOrder = (o: Obj) => {
      type Entry = {
        manager: string;
        operation: string;
        apiVersion: string;
        time: string;
        subresource?: string;
      };
      const entries = o.metadata.managedFields as Entry[];
      const key = (e: Entry) => [
        e.operation,
        String(Math.floor(Date.parse(e.time) / 1000)).padStart(12, "0"),
        e.manager,
        e.apiVersion,
        e.subresource ?? "",
      ];
      const before = (a: Entry, c: Entry) => {
        const [x, y] = [key(a), key(c)];
        const i = x.findIndex((v, j) => v !== y[j]);
        return i < 0 ? 0 : x[i]! < y[i]! ? -1 : 1;
      };
      expect(entries).toEqual([...entries].sort(before));
    };

    const auditMark = () => readAuditLog(b.auditLogPath).length;
    const scenarioLines = (mark: number): AuditEvent[] =>
      readAuditLog(b.auditLogPath)
        .slice(mark)
        .filter((e) => e.objectRef?.namespace === ns && e.userAgent === LAB_AGENT && e.verb !== "watch");
    /**
     * The scenario's audit lines since the mark, once there are `count` (a real server may write
     * a line a moment after its answer): requests of this namespace with the lab's User-Agent, so
     * neither the markers nor the controllers' own requests.
     */
    async function auditSince(mark: number, count: number): Promise<AuditEvent[]> {
      await until(() => scenarioLines(mark).length >= count, `${count} audit lines`);
      return scenarioLines(mark);
    }

    /** Watches still open, closed after each test (a failed assertion leaves its watch open). */
    const open = new Set<AbortController>();
    afterEach(() => {
      for (const a of open) a.abort();
      open.clear();
    });

    beforeEach(async () => {
      ns = `lab-${process.pid.toString(36)}-${++n}`;
      await call("POST", "/api/v1/namespaces", {
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name: ns },
      });
    });

    const createdFields = {
      "f:data": { ".": {}, "f:key": {} },
      "f:metadata": { "f:labels": { ".": {}, [`f:${label}`]: {} } },
    };

    it("create: one ADDED, one Update entry owning what it set (containers with '.'), audit create 201", async () => {
      const mark = auditMark();
      const w = await watch(cms());
      const res = await call("POST", cms(), cm("cm-a"));
      expect(res.code).toBe(201);
      const seen = await w.settle();
      await w.stop();
      expect(seen.map((e) => e.type)).toEqual(["ADDED"]);
      const o = seen[0]!.object;
      expect(managers(o)).toEqual(["e2e.test/Update/"]);
      expect(fieldsOf(o, "e2e.test")).toEqual(createdFields);
      expect(o.metadata.resourceVersion).toBe(res.body.metadata.resourceVersion);
      const audit = await auditSince(mark, 1);
      expect(audit.map((e) => [e.verb, e.responseStatus.code])).toEqual([["create", 201]]);
      // The name comes from the body: the request's path has none.
      expect(audit[0]!.objectRef).toEqual({
        resource: "configmaps",
        namespace: ns,
        name: "cm-a",
        apiVersion: "v1",
      });
    });

    it("generateName create: the audit objectRef has no name, the answer and the owned fields do", async () => {
      const mark = auditMark();
      const res = await call("POST", cms(), cm("", { generateName: "cm-gen-" }));
      expect(res.code).toBe(201);
      expect(res.body.metadata.name).toMatch(/^cm-gen-[a-z0-9]{5}$/);
      const got = await call("GET", `${cms()}/${res.body.metadata.name}`);
      const fields = fieldsOf(got.body, "e2e.test") as Record<string, Record<string, unknown>>;
      expect(fields["f:metadata"]!["f:generateName"]).toEqual({});
      const [audit] = await auditSince(mark, 1);
      expect(audit).toMatchObject({ verb: "create", responseStatus: { code: 201 } });
      expect(audit!.objectRef?.name).toBeUndefined();
    });

    it("update (PUT): one MODIFIED, resourceVersion moves, the Update entry stays one", async () => {
      const created = (await call("POST", cms(), cm("cm-a"))).body;
      const mark = auditMark();
      const w = await watch(cms());
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
      expect(
        (await auditSince(mark, 1)).map((e) => [e.verb, e.objectRef?.name, e.responseStatus.code]),
      ).toEqual([["update", "cm-a", 200]]);
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
      const mark = auditMark();
      const w = await watch(cms());
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
      expect(
        (await auditSince(mark, 1)).map((e) => [e.verb, e.objectRef?.name, e.responseStatus.code]),
      ).toEqual([["patch", "cm-a", 200]]);
    });

    it("managedFields order: an Apply entry before an older Update entry", async () => {
      expect((await call("POST", cms(), cm("cm-order"))).code).toBe(201);
      const res = await call(
        "PATCH",
        `${cms()}/cm-order?fieldManager=zz-apply`,
        { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "cm-order" }, data: { other: "x" } },
        "application/apply-patch+yaml",
      );
      expect(res.code).toBe(200);
      expect(managers(res.body)).toEqual(["zz-apply/Apply/", "e2e.test/Update/"]);
      expectServerOrder(res.body);
    });

    it("no-op apply: no watch event, resourceVersion unchanged, still audited as patch 200", async () => {
      const first = (await apply("cm-a", "value")).body;
      const mark = auditMark();
      const w = await watch(cms());
      const again = await apply("cm-a", "value");
      expect(again.code).toBe(200);
      expect(again.body.metadata.resourceVersion).toBe(first.metadata.resourceVersion);
      expect(await w.settle()).toEqual([]);
      await w.stop();
      expect((await auditSince(mark, 1)).map((e) => [e.verb, e.responseStatus.code])).toEqual([
        ["patch", 200],
      ]);
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
      const w = await watch(deployments());
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
      // (k3s in the lab listed its entry first, having written seconds before; the server sorts)
      expect(managers(o).sort()).toEqual(["e2e.test/Update/", "e2e.test/Update/status", "k3s/Update/status"]);
      expectServerOrder(o);
      expect(fieldsOf(o, "e2e.test", "status")).toEqual({ "f:status": { "f:observedGeneration": {} } });
    });

    it("scale subresource: a Scale answer, generation 2, replicas owned under subresource scale", async () => {
      expect((await call("POST", deployments(), pausedDeployment)).code).toBe(201);
      const mark = auditMark();
      const w = await watch(deployments());
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
      expect(managers(o).sort()).toEqual(["e2e.test/Update/", "e2e.test/Update/scale"]);
      expectServerOrder(o);
      expect(fieldsOf(o, "e2e.test", "scale")).toEqual({ "f:spec": { "f:replicas": {} } });
      expect(
        o.metadata.managedFields.find((e: { subresource?: string }) => e.subresource === "scale").apiVersion,
      ).toBe("apps/v1");
      const main = fieldsOf(o, "e2e.test") as { "f:spec": Record<string, unknown> };
      expect(main["f:spec"]["f:replicas"]).toBeUndefined();
      expect((await auditSince(mark, 1)).map((e) => [e.verb, e.objectRef, e.responseStatus.code])).toEqual([
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
      const mark = auditMark();
      const w = await watch(cms());
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
      expect((await auditSince(mark, 2)).map((e) => [e.verb, e.responseStatus.code])).toEqual([
        ["delete", 200],
        ["patch", 200],
      ]);
    });

    it("deletecollection: one DELETED per object in order, one name-less audit line, a List answer", async () => {
      for (const name of ["cm-a", "cm-b", "cm-c"]) await call("POST", cms(), cm(name));
      const mark = auditMark();
      const w = await watch(cms());
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
      const audit = await auditSince(mark, 1);
      expect(audit.map((e) => [e.verb, e.responseStatus.code])).toEqual([["deletecollection", 200]]);
      expect(audit[0]!.objectRef).toEqual({ resource: "configmaps", namespace: ns, apiVersion: "v1" });
    });

    it("owner-reference cascade: the owner's delete answers a Success Status; owner then dependent DELETED", async () => {
      const parent = (await call("POST", cms(), cm("cm-parent"))).body;
      const ownerReferences = [
        { apiVersion: "v1", kind: "ConfigMap", name: "cm-parent", uid: parent.metadata.uid },
      ];
      await call("POST", cms(), cm("cm-child", { ownerReferences }));
      const w = await watch(cms());
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
          details: { name: "cm-parent", kind: "configmaps", uid: parent.metadata.uid },
        },
      });
      // The garbage collector deletes the dependent after the answer, in its own time.
      await until(
        () => w.events.some((e) => e.type === "DELETED" && e.object.metadata.name === "cm-child"),
        "the dependent's DELETED",
      );
      await w.stop();
      expect(
        w.events.filter((e) => e.type !== "BOOKMARK").map((e) => [e.type, e.object.metadata.name]),
      ).toEqual([
        ["DELETED", "cm-parent"],
        ["DELETED", "cm-child"],
      ]);
    });

    it("dry-run create: 201 with a uid and no resourceVersion, nothing stored, no event, audited", async () => {
      const mark = auditMark();
      const w = await watch(cms());
      const res = await call("POST", `${cms()}?dryRun=All`, cm("cm-dry"));
      expect(res.code).toBe(201);
      expect(res.body.metadata.uid).toBeDefined();
      expect(res.body.metadata.creationTimestamp).toBeDefined();
      expect(res.body.metadata.resourceVersion).toBeUndefined();
      expect(await w.settle()).toEqual([]);
      await w.stop();
      expect((await call("GET", `${cms()}/cm-dry`)).code).toBe(404);
      const audit = await auditSince(mark, 2);
      expect(audit.map((e) => [e.verb, e.responseStatus.code])).toEqual([
        ["create", 201],
        ["get", 404],
      ]);
    });

    it("optimistic-concurrency conflict: 409 Conflict Status, no event, audited as update 409", async () => {
      const created = (await call("POST", cms(), cm("cm-conflict"))).body;
      const stale = structuredClone(created);
      created.data = { key: "winner" };
      expect((await call("PUT", `${cms()}/cm-conflict`, created)).code).toBe(200);
      const mark = auditMark();
      const w = await watch(cms());
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
          details: { name: "cm-conflict", kind: "configmaps" },
          code: 409,
        },
      });
      expect(await w.settle()).toEqual([]);
      await w.stop();
      expect((await auditSince(mark, 1)).map((e) => [e.verb, e.responseStatus.code])).toEqual([
        ["update", 409],
      ]);
    });

    it("watch bookmark: once the resourceVersion moved past the watch's start, a BOOKMARK with only the kind and that resourceVersion", async () => {
      await call("POST", cms(), cm("cm-bookmark"));
      const elsewhere = `${ns}-elsewhere`;
      await call("POST", "/api/v1/namespaces", {
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name: elsewhere },
      });
      // A real server sends a bookmark each minute and 2 s before a watch's timeout, and only at
      // a resourceVersion newer than the one the watch started from: 4 s brings one within 2 s
      // once a write this watch does not show has moved it on.
      const w = await watch(cms(), "&allowWatchBookmarks=true&timeoutSeconds=4");
      const start = Number(await listRv(cms()));
      const other = await call("POST", `/api/v1/namespaces/${elsewhere}/configmaps`, {
        ...cm("cm-other"),
        metadata: { name: "cm-other", namespace: elsewhere },
      });
      expect(other.code).toBe(201);
      const bookmark = await until(() => w.events.find((e) => e.type === "BOOKMARK"), "a bookmark");
      await w.stop();
      expect(w.events.filter((e) => e.type !== "BOOKMARK")).toEqual([]);
      expect(bookmark.object.kind).toBe("ConfigMap");
      expect(bookmark.object.metadata.resourceVersion).toMatch(/^\d+$/);
      expect(Number(bookmark.object.metadata.resourceVersion)).toBeGreaterThanOrEqual(
        Number(other.body.metadata.resourceVersion),
      );
      expect(Number(bookmark.object.metadata.resourceVersion)).toBeGreaterThanOrEqual(start);
      expect(Object.keys(bookmark.object).sort()).toEqual(["apiVersion", "kind", "metadata"]);
    });

    it("watch from a compacted resourceVersion: one ERROR with a 410 Expired Status, then a relist works", async () => {
      await call("POST", cms(), cm("cm-resync"));
      const recent = await listRv(cms());
      await call("POST", cms(), cm("cm-later"));
      const old = await b.expiredResourceVersion(recent);
      const { code, res } = await send(b, "GET", `${cms()}?watch=true&resourceVersion=${old}`, {
        Authorization: `Bearer ${b.token}`,
      });
      expect(code).toBe(200);
      const lines = (await text(res)).trim().split("\n");
      expect(lines).toHaveLength(1);
      const event = JSON.parse(lines[0]!) as Event;
      expect(event.type).toBe("ERROR");
      expect(event.object).toMatchObject({ kind: "Status", status: "Failure", code: 410, reason: "Expired" });
      const list = await call("GET", `${cms()}?labelSelector=${encodeURIComponent(`${label}=s`)}`);
      expect((list.body.items as Obj[]).map((o) => o.metadata.name)).toEqual(["cm-later", "cm-resync"]);
    });
  });
}
