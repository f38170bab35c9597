/**
 * The shared informer against the simulated API server: a watch that ends with 410 Gone lists
 * again and the cache converges (the adds and deletes it missed reach the handlers), a clean end
 * re-watches without a list, and every user of one collection in a process shares one cache.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServer, startApiServer } from "../../test/cluster/apiserver/index.js";
import { untilWith } from "../../test/support/wait.js";
import { crdFiles } from "../crds/files.js";
import { type KObject, Kube, RESOURCES } from "./index.js";

let server: ApiServer;
let kube: Kube;
const until = untilWith({ timeoutMs: 10_000, everyMs: 10 });
let seq = 0;

beforeAll(async () => {
  server = await startApiServer({ bookmarkIntervalMs: 50 });
  for (const f of crdFiles()) await server.installCrdFile(f);
  kube = new Kube(server.kubeConfig());
});
afterAll(async () => {
  await kube?.close();
  await server?.close();
});

async function namespace() {
  const ns = `inf${++seq}`;
  await kube.core.createNamespace({ body: { metadata: { name: ns } } });
  return ns;
}

const claim = (ns: string, name: string): KObject => ({
  apiVersion: "applygate.dev/v1alpha1",
  kind: "FluxClaim",
  metadata: { name, namespace: ns },
  spec: { kustomizationRef: { name: "web", namespace: ns } },
});

describe("the informer", () => {
  it("a watch ended with 410 Gone lists again, and the cache converges with what it missed", async () => {
    const ns = await namespace();
    await kube.apply(RESOURCES.fluxClaim, claim(ns, "kept"));
    await kube.apply(RESOURCES.fluxClaim, claim(ns, "removed"));
    const seen: string[] = [];
    const h = kube.informer<KObject>(RESOURCES.fluxClaim, {
      namespace: ns,
      onChange: (type, o, previous) =>
        seen.push(`${type}:${o.metadata.name}${previous ? `<${previous.metadata.resourceVersion}` : ""}`),
      backoffMs: () => 10,
    });
    await h.synced();
    expect(h.informer.lists).toBe(1);
    const keptBefore = h.informer.get("kept", ns)!.metadata.resourceVersion;

    // The stream ends; while the re-watch is held back, objects change and the server forgets
    // its history. The re-watch from the old version is answered 410: only a list can catch up.
    const path = `/apis/applygate.dev/v1alpha1/namespaces/${ns}/fluxclaims`;
    server.faults.latency(300, { method: "GET", pathPrefix: path });
    expect(server.faults.dropWatches(path)).toBe(1);
    await kube.apply(RESOURCES.fluxClaim, claim(ns, "added"));
    await kube.delete(RESOURCES.fluxClaim, ns, "removed");
    await kube.mergePatch(RESOURCES.fluxClaim, ns, "kept", { metadata: { labels: { v: "2" } } });
    server.faults.expireHistory();
    await until(() => h.informer.lists === 2, "a relist after 410");
    server.faults.latency(0);

    await until(
      () =>
        h.informer.get("added", ns) &&
        !h.informer.get("removed", ns) &&
        h.informer.get("kept", ns)?.metadata.labels?.v === "2",
      "the cache in step with the server",
    );
    expect(seen).toContain("add:added");
    expect(seen.some((e) => e.startsWith("delete:removed"))).toBe(true);
    expect(seen).toContain(`update:kept<${keptBefore}`);

    // And it keeps watching from the relist's version.
    await kube.apply(RESOURCES.fluxClaim, claim(ns, "later"));
    await until(() => h.informer.get("later", ns), "a change after the relist");
    expect(h.informer.lists).toBe(2);
    await h.release();
  });

  it("a watch that ends cleanly watches again from its last version, without a list", async () => {
    const ns = await namespace();
    const h = kube.informer<KObject>(RESOURCES.fluxClaim, { namespace: ns });
    await h.synced();
    const path = `/apis/applygate.dev/v1alpha1/namespaces/${ns}/fluxclaims`;
    expect(server.faults.dropWatches(path)).toBe(1);
    await kube.apply(RESOURCES.fluxClaim, claim(ns, "after-end"));
    await until(() => h.informer.get("after-end", ns), "the object after the re-watch");
    expect(h.informer.lists).toBe(1);
    await h.release();
  });

  it("a watch refused for a while is in step again once one is answered, with no event to wait for", async () => {
    const ns = await namespace();
    const h = kube.informer<KObject>(RESOURCES.fluxClaim, { namespace: ns, backoffMs: () => 20 });
    await h.synced();
    // Nothing is written after this: the version does not move, so no bookmark comes either.
    const path = `/apis/applygate.dev/v1alpha1/namespaces/${ns}/fluxclaims`;
    server.faults.failNext(1_000_000, { method: "GET", pathPrefix: path, status: 403 });
    expect(server.faults.dropWatches(path, true)).toBe(1);
    await until(() => !h.informer.isSynced(), "out of step while every watch is refused");
    server.faults.reset();
    await until(() => h.informer.isSynced(), "in step again once a watch is answered");
    expect(h.informer.lists).toBe(1);
    expect(h.informer.lastError).toBeUndefined();
    await h.release();
  });

  it("every user of one collection shares one cache, listed once, stopped with the last release", async () => {
    const ns = await namespace();
    await kube.apply(RESOURCES.fluxClaim, claim(ns, "shared"));
    const a: string[] = [];
    const b: string[] = [];
    const first = kube.informer<KObject>(RESOURCES.fluxClaim, {
      onChange: (t, o) => a.push(`${t}:${o.metadata.name}`),
    });
    const second = kube.informer<KObject>(RESOURCES.fluxClaim, {
      onChange: (t, o) => b.push(`${t}:${o.metadata.name}`),
    });
    await Promise.all([first.synced(), second.synced()]);
    expect(second.informer).toBe(first.informer);
    expect(first.informer.lists).toBe(1);
    const path = "/apis/applygate.dev/v1alpha1/fluxclaims";
    expect(kube.informers.running()).toContain(path);
    await kube.apply(RESOURCES.fluxClaim, claim(ns, "both-see"));
    await until(() => a.includes("add:both-see") && b.includes("add:both-see"), "both handlers told");
    await first.release();
    expect(kube.informers.running()).toContain(path);
    await kube.apply(RESOURCES.fluxClaim, claim(ns, "second-only"));
    await until(() => b.includes("add:second-only"), "the remaining handler told");
    expect(a).not.toContain("add:second-only");
    await second.release();
    expect(kube.informers.running()).not.toContain(path);
  });
});
