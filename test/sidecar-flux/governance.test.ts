/**
 * Governance at the moment of the write, by the Flux executor as deployed against fluxsim: an
 * attempt whose claim's change window has closed, or whose approval was withdrawn (or never an
 * Approval: an annotation on the claim), ends RequestFailed before the resume and nothing is
 * applied; inside the window, with its Approval, the same attempt applies, and the operation's end
 * joins the claim's history with it.
 */
import { describe, expect, it } from "vitest";
import { RESOURCES } from "../../queue/kube/index.js";
import { fileWorld } from "../support/file-world.js";
import { adopted, configMap, type Scene, startWorld } from "./harness.js";

const world = fileWorld(() => startWorld());

const always = (kind: "allow" | "deny") => ({ kind, schedule: "0 0 * * *", duration: "24h" });

async function claimSpec(s: Scene, spec: Record<string, unknown>, annotations?: Record<string, string>) {
  await world.kube.mergePatch(RESOURCES.fluxClaim, s.claim.namespace, s.claim.name, {
    spec,
    ...(annotations ? { metadata: { annotations } } : {}),
  });
}

/** An Approval of the scene's claim, given by ada. */
async function approve(s: Scene, name: string, spec: Record<string, unknown>) {
  await world.kube.custom.createNamespacedCustomObject({
    group: RESOURCES.approval.group,
    version: RESOURCES.approval.version,
    plural: RESOURCES.approval.plural,
    namespace: s.claim.namespace,
    body: {
      apiVersion: "applygate.dev/v1alpha1",
      kind: "Approval",
      metadata: { name },
      spec: { claimRef: { kind: "FluxClaim", name: s.claim.name }, approver: "ada", ...spec },
    },
  });
}

describe("governance at the Flux executor's write", () => {
  it("a deny window in force at the write: RequestFailed (OutsideChangeWindow), nothing resumed; an override the attempt carries lets it through once, recorded", async () => {
    const s = await adopted(world);
    const commit = await s.pushConfig("2");
    const applied = world.sim.appliedRevisions(s.ks).length;
    await claimSpec(s, { changeWindows: [always("deny")] });
    const before = (await s.readKs()).metadata.resourceVersion;
    const r = await s.run(s.attempt(commit));
    expect(r.phases).toEqual(["Requested", "RequestFailed"]);
    expect(r.last.reason).toBe("OutsideChangeWindow");
    expect((await s.readKs()).metadata.resourceVersion).toBe(before);
    expect(world.sim.appliedRevisions(s.ks)).toHaveLength(applied);

    // The override an annotation offers, which any editor may set, lets nothing through.
    await claimSpec(s, {}, { "applygate.dev/change-window-override": "INC-9" });
    const carrying = s.attempt(commit, { override: { changeWindow: "INC-9", by: "ada" } });
    expect((await s.run(carrying)).last.reason).toBe("OutsideChangeWindow");
    await approve(s, "inc-9", { changeWindowOverride: "INC-9" });
    const over = await s.run(s.attempt(commit, { override: { changeWindow: "INC-9", by: "ada" } }));
    expect(over.last.phase).toBe("Succeeded");
    expect(await s.configValue()).toBe("2");
    const status = (await s.readClaim()).status as { history?: Array<Record<string, unknown>> };
    expect(status.history?.[0]).toMatchObject({
      commit,
      phase: "Succeeded",
      override: { changeWindow: "INC-9", by: "ada" },
      startedBy: "the branch worker, on the change-window override set by ada",
    });
  });

  it("with approval required, an attempt whose approval was withdrawn starts nothing; approved, it applies", async () => {
    const s = await adopted(world);
    const commit = await s.pushConfig("3");
    await claimSpec(s, { changeWindows: [always("allow")], approval: { manual: true } });
    const carrying = s.attempt(commit, { approvals: [{ commit, sources: ["Manual"] }] });
    const r = await s.run(carrying);
    expect(r.last).toMatchObject({ phase: "RequestFailed", reason: "NotApproved" });
    // An annotation on the claim approves nothing; an Approval does.
    await claimSpec(s, {}, { [`approve.applygate.dev/${commit}`]: "eve" });
    const annotated = await s.run(s.attempt(commit, { approvals: [{ commit, sources: ["Manual"] }] }));
    expect(annotated.last).toMatchObject({ phase: "RequestFailed", reason: "NotApproved" });
    await approve(s, "cab-3", { commit });
    const ok = await s.run(s.attempt(commit, { approvals: [{ commit, sources: ["Manual"] }] }));
    expect(ok.last.phase).toBe("Succeeded");
    expect(await s.configValue()).toBe("3");
  });

  it("an attempt listing approvals for its tip only, over an unapproved commit, is refused at the write and nothing is applied", async () => {
    const s = await adopted(world);
    // Applied once through the claim: its last applied commit is where what an apply brings starts.
    const base = await s.pushConfig("base");
    expect((await s.run(s.attempt(base))).last.phase).toBe("Succeeded");
    const under = await s.pushConfig("4");
    const tip = await s.push({ "apps/other.yaml": configMap("other", "1") });
    await claimSpec(s, { approval: { manual: true } });
    await approve(s, "tip", { commit: tip });
    const applied = world.sim.appliedRevisions(s.ks).length;
    const before = (await s.readKs()).metadata.resourceVersion;
    const forged = await s.run(
      s.attempt(tip, { approvals: [{ commit: tip, sources: ["Manual"], by: ["ada"] }] }),
    );
    expect(forged.last).toMatchObject({ phase: "RequestFailed", reason: "NotApproved" });
    expect((await s.readKs()).metadata.resourceVersion).toBe(before);
    expect(world.sim.appliedRevisions(s.ks)).toHaveLength(applied);
    expect(await s.configValue()).toBe("base");

    await approve(s, "under", { commit: under });
    const ok = await s.run(s.attempt(tip, { approvals: [] }));
    expect(ok.last.phase).toBe("Succeeded");
    expect(await s.configValue()).toBe("4");
  });
});
