/**
 * The resume is one guarded server-side apply; a 409 reads the Kustomization again, rechecks it
 * and writes again, on the shared conflict-retry policy, a bounded number of times.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { configMap, scene, startWorld, type World } from "./harness.js";

let world: World;
beforeAll(async () => {
  world = await startWorld();
});
afterAll(async () => {
  await world?.stop();
});

const ksPath = (ns: string) => `/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/${ns}/kustomizations/apps`;

describe.concurrent("a resume that conflicts", () => {
  it("reads again and resumes: Succeeded", async () => {
    const s = await scene(world);
    await s.adopt();
    const commit = await s.push({ "apps/cm.yaml": configMap("app-config", "c1") });
    world.api.faults.failNext(2, { method: "PATCH", pathPrefix: ksPath(s.ns), status: 409 });
    const r = await s.run(s.attempt(commit));
    expect(r.last.phase).toBe("Succeeded");
    expect(await s.configValue()).toBe("c1");
  });

  it("still conflicting after five tries: RequestFailed (ResumeConflict), nothing applied", async () => {
    const s = await scene(world);
    await s.adopt();
    const commit = await s.push({ "apps/cm.yaml": configMap("app-config", "c2") });
    world.api.faults.failNext(5, { method: "PATCH", pathPrefix: ksPath(s.ns), status: 409 });
    const r = await s.run(s.attempt(commit));
    expect(r.last).toMatchObject({ phase: "RequestFailed", reason: "ResumeConflict" });
    expect((await s.readKs()).spec?.suspend).toBe(true);
    expect(await s.configValue()).toBe("1");
  });
});
