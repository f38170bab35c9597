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
