/**
 * The Flux executor reads the Kustomization and its GitRepository from its watch cache. A cache
 * behind the API server must never decide anything by itself: an artifact it has not seen yet is
 * read again from the server (no refusal, no second fetch), and a Kustomization changed since is
 * a 409 on the guarded resume that reads again. Here the cache is held at an old version for the
 * whole operation.
 */
import { describe, expect, it } from "vitest";
import { fluxSpecField } from "../../queue/kube/index.js";
import type { FluxClient } from "../../sidecar/flux/client.js";
import { GIT_REPOSITORY, KUSTOMIZATION } from "../../sidecar/flux/resources.js";
import { fileWorld } from "../support/file-world.js";
import { adopted, type Scene, startWorld } from "./harness.js";

const world = fileWorld(() => startWorld());

const clientOf = (s: Scene) => (s.kind.executor as unknown as { d: { client: FluxClient } }).d.client;

describe("a watch cache behind the API server", () => {
  it("a GitRepository whose fetch the cache has not seen: read again, resumed once, Succeeded", async () => {
    const s = await adopted(world);
    const stale = (await world.kube.get(GIT_REPOSITORY, s.ns, "repo"))!;
    const client = clientOf(s);
    client.observedSource = async () => stale;
    const commit = await s.pushConfig("stale-src");
    const before = world.sim.appliedRevisions(s.ks).length;
    const r = await s.run(s.attempt(commit));
    expect(r.last.phase).toBe("Succeeded");
    expect(world.sim.appliedRevisions(s.ks).slice(before)).toEqual([`main@sha1:${commit}`]);
    expect(await s.configValue()).toBe("stale-src");
  });

  it("a Kustomization changed since the cache's version: the resume's 409 reads again, Succeeded once", async () => {
    const s = await adopted(world);
    const stale = (await world.kube.get(KUSTOMIZATION, s.ns, "apps"))!;
    await world.kube.mergePatch(KUSTOMIZATION, s.ns, "apps", { metadata: { labels: { moved: "yes" } } });
    const client = clientOf(s);
    client.cachedKustomization = () => stale;
    const commit = await s.pushConfig("stale-ks");
    const before = world.sim.appliedRevisions(s.ks).length;
    const r = await s.run(s.attempt(commit));
    expect(r.last.phase).toBe("Succeeded");
    expect(world.sim.appliedRevisions(s.ks).slice(before)).toEqual([`main@sha1:${commit}`]);
    const ks = await s.readKs();
    expect(fluxSpecField(ks, "suspend")).toBe(true);
    expect(ks.metadata.labels?.moved).toBe("yes");
  });
});
