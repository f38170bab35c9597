/**
 * The edit recheck, just before the resume: an API edit accepted into the branch's inbox after
 * the attempt's flush mark ends the attempt Stale (EditedAfterFlush) with nothing resumed, so the
 * older commit never runs over the edit; the attempt for the commit that carries the edit then
 * applies. Real Redis (the gateway's accept script, the worker's fenced tip record), the real Git
 * server and fluxsim.
 */
import { describe, expect, it } from "vitest";
import { StatusReason } from "../../queue/crds/reasons.js";
import { redisFreshnessCheck } from "../../sidecar/tip-check.js";
import { fileWorld } from "../support/file-world.js";
import type { BranchOwner } from "../support/sidecar-world.js";
import { adopted, type Scene, startWorld } from "./harness.js";

const world = fileWorld(() => startWorld());

/** A scene whose last checks ask Redis for edits after the flush, its branch held by its owner. */
async function ownedScene() {
  const s = await adopted(world, {
    checks: { freshness: redisFreshnessCheck(world.redis.client, world.redis.prefix) },
  });
  return { s, branch: await world.branchOwner(`${s.url}@main`) };
}

/** An API edit of app-config on the cluster, and its write accepted by the gateway; the inbox entry id. */
async function edit(s: Scene, branch: BranchOwner, value: string) {
  await world.editConfigMap(s.ns, "app-config", { v: value });
  return branch.acceptEdit({
    target: { namespace: s.ns, name: "target" },
    path: "target",
    configMap: "app-config",
  });
}

describe("the Flux edit recheck", () => {
  it("an edit accepted after the flush mark ends the attempt Stale before the resume; the attempt carrying it applies", async () => {
    const { s, branch } = await ownedScene();
    const older = await s.pushConfig("2");
    await branch.record(older);
    // The flush published `older` having read the inbox up to here; then the user edits.
    const mark = await edit(s, branch, "0");
    const editEntry = await edit(s, branch, "3");
    const applied = world.sim.appliedRevisions(s.ks).length;
    const before = (await s.readKs()).metadata.resourceVersion;

    const attempt = s.attempt(older, { editsAfter: { mark, folders: ["target"] } });
    const r = await s.run(attempt);
    expect(r.phases).toEqual(["Requested", "Stale"]);
    expect(r.last.reason).toBe(StatusReason.EditedAfterFlush);
    // Nothing resumed: the older commit never ran over the edit.
    expect((await s.readKs()).metadata.resourceVersion).toBe(before);
    expect(world.sim.appliedRevisions(s.ks)).toHaveLength(applied);
    expect(await s.configValue()).toBe("3");
    // Its record withdrawn, as for any Stale.
    expect((await s.operation())?.token).not.toBe(attempt.token);

    // The worker flushes again: the commit holding the edit, sent with the mark past it.
    const carrying = await s.pushConfig("3");
    await branch.record(carrying);
    const again = await s.run(s.attempt(carrying, { editsAfter: { mark: editEntry, folders: ["target"] } }));
    expect(again.phases).toEqual(["Requested", "Running", "Settling", "Succeeded"]);
    expect(world.sim.appliedRevisions(s.ks).slice(applied)).toEqual([`main@sha1:${carrying}`]);
    expect(await s.configValue()).toBe("3");
  });

  it("an edit to another folder, or one before the mark, does not hold the apply", async () => {
    const { s, branch } = await ownedScene();
    const commit = await s.pushConfig("5");
    await branch.record(commit);
    const mark = await edit(s, branch, "4"); // in the inbox, but not after the mark
    const r = await s.run(s.attempt(commit, { editsAfter: { mark, folders: ["elsewhere"] } }));
    expect(r.last.phase).toBe("Succeeded");
    expect(await s.configValue()).toBe("5");
  });

  it("past the bound (no recheck on the attempt) the apply goes: continuous editing never starves it", async () => {
    const { s, branch } = await ownedScene();
    const commit = await s.pushConfig("7");
    await branch.record(commit);
    await edit(s, branch, "8");
    const r = await s.run(s.attempt(commit));
    expect(r.last.phase).toBe("Succeeded");
    // The window and a Repair handle this one, as before.
    expect(await s.configValue()).toBe("7");
  });
});
