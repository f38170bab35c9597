/**
 * The resume is one guarded server-side apply; a 409 reads the Kustomization again, rechecks it
 * and writes again, on the shared conflict-retry policy, a bounded number of times.
 */
import { describe, expect, it } from "vitest";
import { fluxSpecField } from "../../queue/kube/index.js";
import { fileWorld } from "../support/file-world.js";
import { adopted, startWorld } from "./harness.js";

const world = fileWorld(() => startWorld());

const ksPath = (ns: string) => `/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/${ns}/kustomizations/apps`;

describe.concurrent("a resume that conflicts", () => {
  it("reads again and resumes: Succeeded", async () => {
    const s = await adopted(world);
    const commit = await s.pushConfig("c1");
    world.api.faults.failNext(2, { method: "PATCH", pathPrefix: ksPath(s.ns), status: 409 });
    const r = await s.run(s.attempt(commit));
    expect(r.last.phase).toBe("Succeeded");
    expect(await s.configValue()).toBe("c1");
  });

  it("still conflicting after five tries: RequestFailed (ResumeConflict), nothing applied", async () => {
    const s = await adopted(world);
    const commit = await s.pushConfig("c2");
    world.api.faults.failNext(5, { method: "PATCH", pathPrefix: ksPath(s.ns), status: 409 });
    const r = await s.run(s.attempt(commit));
    expect(r.last).toMatchObject({ phase: "RequestFailed", reason: "ResumeConflict" });
    expect(fluxSpecField(await s.readKs(), "suspend")).toBe(true);
    expect(await s.configValue()).toBe("1");
  });
});
