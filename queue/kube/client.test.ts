import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServer, startApiServer } from "../../test/cluster/apiserver/index.js";
import { untilWith } from "../../test/support/wait.js";
import { ConfigError } from "../config.js";
import { crdFiles } from "../crds/files.js";
import {
  apiFailure,
  ConflictRetriesExhausted,
  type KObject,
  Kube,
  loadKubeConfig,
  RESOURCES,
  retryOnConflict,
  StatusFieldNotOwned,
  statusWriter,
} from "./index.js";

let server: ApiServer;
let kube: Kube;

const until = untilWith({ timeoutMs: 5000, everyMs: 10 });

const claim = (name: string): KObject => ({
  apiVersion: "applygate.dev/v1alpha1",
  kind: "FluxClaim",
  metadata: { name, namespace: "k" },
  spec: { kustomizationRef: { name: "web", namespace: "flux-system" } },
});

beforeAll(async () => {
  server = await startApiServer({ bookmarkIntervalMs: 50 });
  for (const f of crdFiles()) await server.installCrdFile(f);
  kube = new Kube(server.kubeConfig());
  await kube.core.createNamespace({ body: { metadata: { name: "k" } } });
});
afterAll(async () => server?.close());

describe("kube helpers", () => {
  it("parses ApiException bodies that arrive as JSON strings", () => {
    const f = apiFailure({
      code: 409,
      body: JSON.stringify({ reason: "Conflict", message: "modified", code: 409 }),
    });
    expect(f).toEqual({ code: 409, reason: "Conflict", message: "modified" });
    expect(apiFailure({ code: 500, body: "plain text" }).message).toBe("plain text");
  });

  it("get answers undefined for a missing object; apply creates under the field manager applygate", async () => {
    expect(await kube.get(RESOURCES.fluxClaim, "k", "nope")).toBeUndefined();
    const created = await kube.apply(RESOURCES.fluxClaim, claim("a"));
    expect(created.metadata.managedFields?.[0]).toMatchObject({ manager: "applygate", operation: "Apply" });
  });

  it("a status patch with a stale resourceVersion is a 409, and retryOnConflict re-reads", async () => {
    const c = await kube.apply(RESOURCES.fluxClaim, claim("b"));
    await kube.mergePatch(RESOURCES.fluxClaim, "k", "b", { metadata: { labels: { x: "1" } } });
    const stale = await kube
      .patchStatus(RESOURCES.fluxClaim, "k", "b", { repairPending: true }, c.metadata.resourceVersion)
      .catch((e) => e);
    expect(stale.code).toBe(409);
    let reads = 0;
    await retryOnConflict(
      async () => {
        reads++;
        return reads === 1 ? c : ((await kube.get<KObject>(RESOURCES.fluxClaim, "k", "b")) as KObject);
      },
      () => ({ repairPending: true }),
      (cur, status) => kube.patchStatus(RESOURCES.fluxClaim, "k", "b", status, cur.metadata.resourceVersion),
      { sleep: async () => {} },
    );
    expect(reads).toBe(2);
    const b = await kube.get<KObject>(RESOURCES.fluxClaim, "k", "b");
    expect((b?.status as { repairPending?: boolean } | undefined)?.repairPending).toBe(true);
    await expect(
      retryOnConflict(
        async () => c,
        () => ({}),
        () => kube.patchStatus(RESOURCES.fluxClaim, "k", "b", {}, c.metadata.resourceVersion),
        { max: 2, sleep: async () => {} },
      ),
    ).rejects.toBeInstanceOf(ConflictRetriesExhausted);
  });

  it("a party writes condition types of a list it does not own only given the object it read", async () => {
    const c = await kube.apply(RESOURCES.fluxClaim, claim("conditions"));
    const writer = statusWriter(kube, "claim", "branch-worker");
    const conditions = [
      {
        type: "ApplyAllowed",
        status: "True",
        reason: "Open",
        message: "",
        lastTransitionTime: "2026-03-01T00:00:00Z",
      },
    ];
    const rv = c.metadata.resourceVersion;
    // Without the object, whether the other types are kept cannot be told: refused, nothing sent.
    expect(() => writer.patch(RESOURCES.fluxClaim, "k", "conditions", { conditions }, rv)).toThrow(
      StatusFieldNotOwned,
    );
    const out = await writer.patch(RESOURCES.fluxClaim, "k", "conditions", { conditions }, rv, c);
    expect(out.status).toMatchObject({ conditions });
    expect(out.metadata.managedFields?.find((f) => f.subresource === "status")?.manager).toBe(
      "applygate-branch-worker",
    );
  });

  it("createEvent makes an Event under no field manager of ours; patchEvent joins its series, undefined once it is gone", async () => {
    const regarding = { apiVersion: "applygate.dev/v1alpha1", kind: "FluxClaim", namespace: "k", name: "a" };
    const event = {
      name: "a.e1",
      eventTime: new Date("2026-03-01T00:00:00.123Z"),
      type: "Normal" as const,
      reason: "Adopted",
      action: "Hold",
      note: "n".repeat(2000),
      regarding: { ...regarding, uid: undefined },
      reportingController: "applygate.dev/test",
      reportingInstance: "test-0",
    };
    const made = await kube.createEvent(event);
    const stored = await kube.get<KObject & Record<string, unknown>>(RESOURCES.event, "k", "a.e1");
    expect(stored).toMatchObject({
      eventTime: "2026-03-01T00:00:00.123000Z",
      type: "Normal",
      reason: "Adopted",
      action: "Hold",
      regarding,
      reportingController: "applygate.dev/test",
      reportingInstance: "test-0",
    });
    expect(stored?.regarding).not.toHaveProperty("uid");
    expect(stored?.note).toHaveLength(1024);
    // The server records the client's own manager (its user agent), never one of ours.
    const notOurs = [expect.not.stringMatching(/^applygate/)];
    expect(made.metadata.managedFields?.map((f) => f.manager)).toEqual(notOurs);
    const series = { count: 2, lastObservedTime: "2026-03-01T00:01:00.000000Z" };
    const patched = await kube.patchEvent("k", "a.e1", { series });
    expect(patched).toMatchObject({ series, note: stored?.note });
    expect(patched?.metadata.managedFields?.map((f) => f.manager)).toEqual(notOurs);
    expect(await kube.patchEvent("k", "gone", { series })).toBeUndefined();
    // A name taken is the API's 409.
    await expect(kube.createEvent(event)).rejects.toMatchObject({ code: 409 });
  });

  it("the informer comes back after its connection breaks and keeps its cache in step", async () => {
    const seen: string[] = [];
    const h = kube.informer<KObject>(RESOURCES.fluxClaim, {
      namespace: "k",
      onChange: (type, o) => seen.push(`${type}:${o.metadata.name}`),
      backoffMs: () => 20,
    });
    await h.synced();
    expect(h.informer.get("a", "k")).toBeDefined();
    server.faults.dropWatches("/apis/applygate.dev", true);
    server.faults.expireHistory();
    await kube.apply(RESOURCES.fluxClaim, claim("after-break"));
    await until(() => h.informer.get("after-break", "k") !== undefined, "the new object in the cache");
    expect(seen).toContain("add:after-break");
    await h.release();
    await h.release(); // a second release is harmless
    expect(kube.informers.running()).toEqual([]);
  });
});

describe("loadKubeConfig", () => {
  it("names the setting when the file cannot be read", () => {
    expect(() => loadKubeConfig("/nonexistent/kubeconfig")).toThrow(ConfigError);
    expect(() => loadKubeConfig("/nonexistent/kubeconfig")).toThrow(/--kubeconfig \(KUBECONFIG\)/);
  });

  it("loads the named file", async () => {
    const dir = await mkdtemp(join(tmpdir(), "kubeconfig-"));
    const file = join(dir, "config");
    await writeFile(
      file,
      [
        "apiVersion: v1",
        "kind: Config",
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]",
        "users: [{name: u, user: {token: t}}]",
        "contexts: [{name: x, context: {cluster: c, user: u}}]",
        "current-context: x",
      ].join("\n"),
    );
    expect(loadKubeConfig(file).getCurrentCluster()?.server).toBe("http://127.0.0.1:1");
  });
});
