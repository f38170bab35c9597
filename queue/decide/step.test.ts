import { describe, expect, it } from "vitest";
import {
  A,
  argoClaim,
  argoListed,
  B,
  C,
  cm,
  Driver,
  flushes,
  fluxClaim,
  listed,
  report,
  sends,
  sha,
} from "../../test/support/decisions.js";
import type { ApplierWriteReport } from "../contract.js";
import { BACKOFF_MAX_MS, backoffDelay } from "./backoff.js";
import { isGitAhead } from "./due.js";

function applierWrite(
  claimName: string,
  object: string,
  writtenAt: string,
  manager = "kustomize-controller",
  claim = fluxClaim(claimName).claim,
) {
  const r: ApplierWriteReport = {
    type: "applierWrite",
    token: "any",
    claim,
    branchKey: "k",
    object: cm(object),
    manager,
    writtenAt,
    resourceVersion: "1",
    observedAt: writtenAt,
  };
  return { type: "ApplierWrite" as const, report: r };
}

const iso = (ms: number) => new Date(ms).toISOString();

/**
 * An apply window open: target u1 (naming claim "app") settled at A, an API edit of x decided,
 * then the ForeignCommit attempt for B sent.
 */
/** The collision of the Flux app's apply of B (token) with the edit of cm/x, GitTarget u1. */
const collisionOf = (token: string | undefined) => ({
  type: "LogCollision",
  object: cm("x"),
  claim: fluxClaim("app").claim,
  applier: fluxClaim("app").applier,
  commit: B,
  token,
  targetUid: "u1",
});

function windowed(target = listed("u1", "app")) {
  const d = new Driver();
  d.settle([target], A);
  const out = d.on({ type: "Observed", tip: B, pushedByUs: false });
  const editAt = d.now;
  d.on({
    type: "WriteDecided",
    entryId: "w",
    targetUid: "u1",
    createdObjects: [],
    editedObjects: [{ ref: cm("x"), editedAt: iso(editAt) }],
  });
  const [att] = sends(d.publish(out, B));
  return { d, att, editAt };
}

/** Target u1 (naming claim "app") settled at A, then the ForeignCommit attempt for B sent; no edit yet. */
function sentForB() {
  const d = new Driver();
  d.settle([listed("u1", "app")], A);
  const [att] = sends(d.publish(d.on({ type: "Observed", tip: B, pushedByUs: false }), B));
  return { d, att, editAt: d.now };
}

describe("observing", () => {
  it("the first observation after a start is a baseline: converge pending, never ForeignCommit", () => {
    const d = new Driver();
    d.on({ type: "TargetsListed", targets: [listed("u1", "app")] });
    const out = d.on({ type: "Observed", tip: A, pushedByUs: false });
    expect(flushes(out)).toHaveLength(1);
    const [attempt] = sends(d.publish(out, A));
    expect(attempt?.targets).toEqual([{ uid: "u1", namespace: "apps", name: "gt-u1", reason: "CatchUp" }]);
    expect(attempt?.commit).toBe(A);
  });

  it("a tip we pushed leaves nothing pending", () => {
    const d = new Driver();
    d.settle([listed("u1", "app")], A);
    expect(d.on({ type: "Observed", tip: B, pushedByUs: true })).toEqual([]);
    expect(d.state.appliers["FluxClaim/apps/app"]?.pending).toEqual({ all: [], byTarget: {} });
  });

  it("another tip is a ForeignCommit for every applier on the branch", () => {
    const d = new Driver();
    d.settle([listed("u1", "app"), listed("u2", "infra")], A);
    const sent = sends(d.publish(d.on({ type: "Observed", tip: B, pushedByUs: false }), B));
    expect(sent.map((a) => [a.claim.name, a.targets[0]?.reason])).toEqual([
      ["app", "ForeignCommit"],
      ["infra", "ForeignCommit"],
    ]);
  });

  it("an empty branch asks nothing", () => {
    const d = new Driver();
    d.on({ type: "TargetsListed", targets: [listed("u1", "app")] });
    expect(d.on({ type: "Observed", tip: null, pushedByUs: false })).toEqual([]);
    expect(d.advance(60_000).filter((a) => a.type !== "ScheduleWake")).toEqual([]);
    // The reason stays pending until there is a commit to apply.
    expect(flushes(d.on({ type: "Observed", tip: A, pushedByUs: true }))).toHaveLength(1);
  });

  it("no attempt before the first observation", () => {
    const d = new Driver();
    d.on({ type: "TargetsListed", targets: [listed("u1", "app")] });
    d.on({ type: "RefusalReceived", targetUid: "u1" });
    expect(d.advance(10 * 60_000).filter((a) => a.type === "Flush" || a.type === "SendAttempt")).toEqual([]);
  });
});

describe("reasons", () => {
  it("reasons and precedence: ForeignCommit > Repair > Refusal > CatchUp, one reason per target per attempt", () => {
    const d = new Driver();
    d.settle([listed("u1", "app", { onRefusal: "Reapply" }), listed("u2", "app"), listed("u3", "app")], A);
    d.advance(61_000);
    // u1: Refusal and adopt pending; u2: adopt pending; u3 nothing of its own.
    const sinceS = d.log.length; // every action from here: the flush a due applier asks for
    d.on({ type: "RefusalReceived", targetUid: "u1" });
    d.on({
      type: "WriteDecided",
      entryId: "w1",
      targetUid: "u1",
      createdObjects: [cm("x")],
      editedObjects: [],
    });
    d.on({
      type: "WriteDecided",
      entryId: "w2",
      targetUid: "u2",
      createdObjects: [cm("y")],
      editedObjects: [],
    });
    d.on({ type: "Published", upToMark: "w2", tip: B });
    let sent = sends(d.publish(d.log.slice(sinceS), B));
    expect(sent[0]?.targets.map((t) => [t.uid, t.reason])).toEqual([
      ["u1", "Refusal"],
      ["u2", "CatchUp"],
    ]);
    d.on(report(sent[0]?.token ?? "", "app", "Succeeded", B));
    // A ForeignCommit outranks everything, for every target; a Repair outranks a Refusal.
    d.advance(61_000);
    const sinceS2 = d.log.length; // every action from here: the flush a due applier asks for
    d.on({ type: "RefusalReceived", targetUid: "u1" });
    d.on({ type: "Observed", tip: C, pushedByUs: false });
    d.state.appliers["FluxClaim/apps/app"]?.pending.byTarget.u2?.push("Repair");
    sent = sends(d.publish(d.log.slice(sinceS2), C));
    expect(sent[0]?.targets.map((t) => t.reason)).toEqual([
      "ForeignCommit",
      "ForeignCommit",
      "ForeignCommit",
    ]);
  });

  it("a Repair outranks a Refusal, which outranks a CatchUp", async () => {
    const { reasonForTarget } = await import("./reasons.js");
    expect(reasonForTarget({ all: ["Converge"], byTarget: { u: ["Refusal", "Repair"] } }, "u")).toBe(
      "Repair",
    );
    expect(reasonForTarget({ all: ["Converge"], byTarget: { u: ["Refusal"] } }, "u")).toBe("Refusal");
    expect(reasonForTarget({ all: ["Converge"], byTarget: {} }, "u")).toBe("CatchUp");
  });

  it("any Succeeded answers every pending reason", () => {
    const d = new Driver();
    d.settle([listed("u1", "app", { onRefusal: "Reapply" })], A);
    const sinceS = d.log.length; // every action from here: the flush a due applier asks for
    d.advance(61_000);
    d.on({ type: "RefusalReceived", targetUid: "u1" });
    d.on({ type: "Observed", tip: B, pushedByUs: false });
    d.on({
      type: "WriteDecided",
      entryId: "w1",
      targetUid: "u1",
      createdObjects: [cm("x")],
      editedObjects: [],
    });
    // The flush closes every window: its publication carries w1 too.
    const [att] = sends(d.publish(d.log.slice(sinceS), C, "w1"));
    expect(att?.targets.map((t) => t.reason)).toEqual(["ForeignCommit"]);
    expect(d.state.appliers["FluxClaim/apps/app"]?.operation?.carried.byTarget.u1).toEqual([
      "Refusal",
      "Adopt",
    ]);
    d.on(report(att?.token ?? "", "app", "Succeeded", C));
    const a = d.state.appliers["FluxClaim/apps/app"];
    expect(a?.pending).toEqual({ all: [], byTarget: {} });
    expect(a?.lastAppliedCommit).toBe(C);
    expect(d.advance(10 * 60_000).filter((x) => x.type === "Flush")).toEqual([]);
  });

  it("a reason raised while an attempt is out stays pending after it succeeds", () => {
    const d = new Driver();
    d.settle([listed("u1", "app")], A);
    const [att] = sends(d.publish(d.on({ type: "Observed", tip: B, pushedByUs: false }), B));
    d.on({ type: "Observed", tip: C, pushedByUs: false });
    const out = d.on(report(att?.token ?? "", "app", "Succeeded", B));
    const [next] = sends(d.publish(out, C));
    expect(next?.commit).toBe(C);
    expect(next?.targets[0]?.reason).toBe("ForeignCommit");
  });

  it("converge of the last applied commit asks nothing", () => {
    const d = new Driver();
    d.settle([listed("u1", "app")], A);
    // A restart with the claim's status at A: the baseline converge asks nothing.
    d.on({
      type: "Restarted",
      tokenPrefix: "r",
      claims: [{ ...fluxClaim("app"), source: "flux-system/app", lastAppliedCommit: A }],
      saved: d.state,
    });
    expect(d.on({ type: "Observed", tip: A, pushedByUs: false })).toEqual([]);
    // A GitTarget newly naming the claim converges only if the applier is not at the tip.
    expect(d.on({ type: "TargetsListed", targets: [listed("u1", "app"), listed("u2", "app")] })).toEqual([]);
    d.on({ type: "Observed", tip: B, pushedByUs: true });
    d.on({ type: "TargetsListed", targets: [listed("u1", "app"), listed("u2", "app"), listed("u3", "app")] });
    const [att] = sends(d.publish(d.log.slice(-1), B));
    expect(att?.targets).toEqual([{ uid: "u3", namespace: "apps", name: "gt-u3", reason: "CatchUp" }]);
  });

  it("an adopt is never skipped as already applied, and waits for the write that created the object", () => {
    const d = new Driver();
    d.settle([listed("u1", "app")], A);
    const decided = d.on({
      type: "WriteDecided",
      entryId: "w1",
      targetUid: "u1",
      createdObjects: [cm("new")],
      editedObjects: [{ ref: cm("new"), editedAt: iso(d.now) }],
    });
    expect(flushes(decided)).toEqual([]);
    // Published by the ordinary path (no flush): our own push, so the applier at A has an adopt.
    const out = d.on({ type: "Published", upToMark: "w1", tip: B });
    const [att] = sends(d.publish(out, B));
    expect(att?.targets[0]?.reason).toBe("CatchUp");
    d.on(report(att?.token ?? "", "app", "Succeeded", B));
    // Same commit again: still adopted.
    d.on({
      type: "WriteDecided",
      entryId: "w2",
      targetUid: "u1",
      createdObjects: [cm("n2")],
      editedObjects: [],
    });
    const again = sends(d.publish(d.on({ type: "Published", upToMark: "w2", tip: B }), B));
    expect(again[0]?.commit).toBe(B);
  });

  it("first naming of a claim per uid converges; a recreated target converges again", () => {
    const d = new Driver();
    d.settle([listed("u1", "app")], A);
    d.on({ type: "Observed", tip: B, pushedByUs: true });
    expect(d.on({ type: "TargetsListed", targets: [listed("u1", "app")] })).toEqual([]);
    const [att] = sends(d.publish(d.on({ type: "TargetsListed", targets: [listed("u1b", "app")] }), B));
    expect(att?.targets).toEqual([{ uid: "u1b", namespace: "apps", name: "gt-u1b", reason: "CatchUp" }]);
  });
});

describe("refusals", () => {
  it("a Refusal is due only with onRefusal Reapply", () => {
    const d = new Driver();
    d.settle([listed("u1", "app")], A);
    expect(d.on({ type: "RefusalReceived", targetUid: "u1" })).toEqual([]);
  });

  it("a suspended target freezes its applier for every reason; the reasons are decided when it resumes", () => {
    const d = new Driver();
    const frozen = listed("u2", "app2", { onRefusal: "Reapply", suspended: true });
    d.settle([listed("u1", "app"), frozen], A);
    // A refusal, a foreign commit and a first naming (converge) all stay pending: nothing flushes.
    expect(flushes(d.on({ type: "RefusalReceived", targetUid: "u2" }))).toEqual([]);
    const foreign = d.on({ type: "Observed", tip: B, pushedByUs: false });
    const [other] = sends(d.publish(foreign, B));
    expect(other?.claim.name).toBe("app");
    expect(sends(d.log).map((a) => a.claim.name)).not.toContain("app2");
    expect(flushes(d.advance(600_000))).toEqual([]);
    // Resumed: one attempt carries what stayed pending.
    const resumed = d.on({
      type: "TargetsListed",
      targets: [listed("u1", "app"), { ...frozen, suspended: false }],
    });
    const [att] = sends(d.publish(resumed, B));
    expect(att?.claim.name).toBe("app2");
    expect(att?.targets.map((t) => t.reason)).toEqual(["ForeignCommit"]);
  });

  it("at most one Refusal request a minute per target, a refusal inside the minute carried by a trailing one", () => {
    const d = new Driver();
    d.settle([listed("u1", "app", { onRefusal: "Reapply" })], A);
    const [first] = sends(d.publish(d.on({ type: "RefusalReceived", targetUid: "u1" }), A));
    expect(first?.targets[0]?.reason).toBe("Refusal");
    d.on(report(first?.token ?? "", "app", "Succeeded", A));
    d.advance(10_000);
    const inside = d.on({ type: "RefusalReceived", targetUid: "u1" });
    expect(flushes(inside)).toEqual([]);
    expect(inside).toContainEqual({ type: "ScheduleWake", at: d.now - 10_000 + 60_000 });
    d.advance(5_000);
    d.on({ type: "RefusalReceived", targetUid: "u1" });
    expect(flushes(d.advance(44_000))).toEqual([]);
    const trailing = d.advance(1_000);
    expect(sends(d.publish(trailing, A))[0]?.targets[0]?.reason).toBe("Refusal");
  });
});

describe("Argo CD appliers", () => {
  it("a Refusal on a target an ArgoCDClaim holds is sent to the Application (onRefusal Reapply)", () => {
    const d = new Driver();
    d.settle([argoListed("u1", "app", { onRefusal: "Reapply" })], A);
    const [attempt] = sends(d.publish(d.on({ type: "RefusalReceived", targetUid: "u1" }), A));
    expect(attempt?.claim).toEqual(argoClaim("app").claim);
    expect(attempt?.applier).toEqual(argoClaim("app").applier);
    expect(attempt?.targets).toEqual([{ uid: "u1", namespace: "apps", name: "gt-u1", reason: "Refusal" }]);
    // Ignore (the default) asks nothing.
    const quiet = new Driver();
    quiet.settle([argoListed("u1", "app")], A);
    expect(quiet.on({ type: "RefusalReceived", targetUid: "u1" })).toEqual([]);
  });

  it("a late write of Argo CD's own field manager over a newer edit is withheld and makes a Repair due", () => {
    const { d, att, editAt } = windowed(argoListed("u1", "app"));
    const claim = argoClaim("app").claim;
    const out = d.on(applierWrite("app", "x", iso(editAt + 1_000), "argocd-controller", claim));
    expect(out).toContainEqual({ type: "RecordRepairPending", claim, pending: true });
    const done = d.on(report(att?.token ?? "", "app", "Succeeded", B, claim));
    const [repair] = sends(d.publish(done, C));
    expect(repair?.applier).toEqual(argoClaim("app").applier);
    expect(repair?.targets[0]?.reason).toBe("Repair");
  });

  it("a write of another tool's manager is not Argo CD's apply: no Repair", () => {
    const { d, editAt } = windowed(argoListed("u1", "app"));
    const claim = argoClaim("app").claim;
    const out = d.on(applierWrite("app", "x", iso(editAt + 1_000), "kustomize-controller", claim));
    expect(out.filter((a) => a.type === "RecordRepairPending" || a.type === "LogCollision")).toEqual([]);
  });
});

describe("due", () => {
  it("due = reason pending ∧ no operation out ∧ no source-sharer with one out ∧ past backoff", () => {
    const d = new Driver();
    d.settle([listed("u1", "app", { sourceName: "repo" }), listed("u2", "infra", { sourceName: "repo" })], A);
    const sinceHold = d.log.length; // every action from here: the flush a due applier asks for
    d.on({ type: "Observed", tip: B, pushedByUs: false });
    // One operation out per source: only one of the two sharing "repo" goes.
    const first = sends(d.publish(d.log.slice(sinceHold), B));
    expect(first).toHaveLength(1);
    expect(d.advance(1_000).filter((a) => a.type === "Flush")).toEqual([]);
    const done = d.on(report(first[0]?.token ?? "", first[0]?.claim.name ?? "", "Failed"));
    const second = sends(d.publish(done, B));
    expect(second).toHaveLength(1);
    expect(second[0]?.claim.name).not.toBe(first[0]?.claim.name);
    d.on(report(second[0]?.token ?? "", second[0]?.claim.name ?? "", "Succeeded", B));
    // The failed one waits out its backoff (2 s) before it is due again.
    expect(d.advance(1_000).filter((a) => a.type === "Flush")).toEqual([]);
    const third = sends(d.publish(d.advance(1_000), B));
    expect(third.map((a) => a.claim.name)).toEqual([first[0]?.claim.name]);
  });

  it("appliers sharing a source take turns, oldest turn first", () => {
    const d = new Driver();
    d.settle([listed("u1", "a", { sourceName: "repo" }), listed("u2", "b", { sourceName: "repo" })], A);
    // "a" got the first turn at settle, "b" the second; on the next push "a" goes first again.
    const turns: string[] = [];
    for (const tip of [B, C]) {
      let out = d.on({ type: "Observed", tip, pushedByUs: false });
      for (let i = 0; i < 2; i++) {
        const [att] = sends(d.publish(out, tip));
        turns.push(att?.claim.name ?? "");
        out = d.on(report(att?.token ?? "", att?.claim.name ?? "", "Succeeded", tip));
      }
    }
    expect(turns).toEqual(["a", "b", "a", "b"]);
  });

  it("the barrier: an applier whose GitTarget's folder is not in the tip's tree is asked nothing, for any reason, until a published write creates it", () => {
    const d = new Driver();
    // u1's folder is in the tip; u2's (naming the same claim) is not, though the branch has commits.
    d.absent.add("u2");
    const withRepair = { ...fluxClaim("app"), source: "flux-system/app", repairPending: true };
    d.on({ type: "Restarted", tokenPrefix: "t", claims: [withRepair] });
    d.on({
      type: "TargetsListed",
      targets: [listed("u1", "app", { onRefusal: "Reapply" }), listed("u2", "app", { onRefusal: "Reapply" })],
    });
    const out = [...d.on({ type: "Observed", tip: A, pushedByUs: false })];
    out.push(...d.on({ type: "Observed", tip: B, pushedByUs: false }));
    out.push(...d.on({ type: "RefusalReceived", targetUid: "u2" }));
    out.push(
      ...d.on({
        type: "WriteDecided",
        entryId: "w1",
        targetUid: "u1",
        createdObjects: [cm("x")],
        editedObjects: [],
      }),
    );
    out.push(...d.on({ type: "Published", upToMark: "w1", tip: C }));
    for (let i = 0; i < 5; i++) out.push(...d.advance(10 * 60_000));
    // Converge, ForeignCommit, Refusal, Repair and an adopt are pending: none is asked for.
    expect(flushes(out)).toEqual([]);
    expect(sends(out)).toEqual([]);
    const pending = d.state.appliers["FluxClaim/apps/app"]?.pending;
    expect(pending?.all).toEqual(expect.arrayContaining(["Converge", "ForeignCommit", "Repair"]));
    expect(pending?.byTarget.u1).toContain("Adopt");
    expect(pending?.byTarget.u2).toContain("Refusal");

    // A write of u2 creates its folder; once a publication shows it in the tip, the attempt goes.
    d.absent.delete("u2");
    d.on({
      type: "WriteDecided",
      entryId: "w2",
      targetUid: "u2",
      createdObjects: [cm("y")],
      editedObjects: [],
    });
    const D = sha("d");
    const [att] = sends(d.publish(d.on({ type: "Published", upToMark: "w2", tip: D }), D));
    expect(att?.commit).toBe(D);
    expect(att?.targets.map((t) => [t.uid, t.reason])).toEqual([
      ["u1", "ForeignCommit"],
      ["u2", "ForeignCommit"],
    ]);
  });

  it("the barrier holds again when a foreign commit removes the folder, until one brings it back", () => {
    const d = new Driver();
    d.settle([listed("u1", "app")], A);
    d.absent.add("u1");
    expect(d.on({ type: "Observed", tip: B, pushedByUs: false })).toEqual([]);
    expect(d.on({ type: "Tick" }).filter((a) => a.type !== "ScheduleWake")).toEqual([]);
    d.absent.delete("u1");
    const out = d.on({ type: "Observed", tip: C, pushedByUs: false });
    expect(sends(d.publish(out, C)).map((a) => [a.commit, a.targets[0]?.reason])).toEqual([
      [C, "ForeignCommit"],
    ]);
  });

  it("a GitTarget listed after the tip was observed passes the barrier by the listing's read of that tip, not of another commit", () => {
    const d = new Driver();
    d.settle([listed("u1", "app")], A);
    d.on({ type: "Observed", tip: B, pushedByUs: true });
    const both = [listed("u1", "app"), listed("u2", "app")];
    // A new GitTarget naming the claim: its converge waits for its folder to be read in the tip.
    expect(
      d.on({ type: "TargetsListed", targets: both, folders: { commit: A, present: ["u1", "u2"] } }),
    ).toEqual([]);
    expect(d.state.appliers["FluxClaim/apps/app"]?.pending.byTarget.u2).toEqual(["Converge"]);
    const out = d.on({ type: "TargetsListed", targets: both, folders: { commit: B, present: ["u1", "u2"] } });
    expect(sends(d.publish(out, B)).map((a) => [a.commit, a.targets])).toEqual([
      [B, [{ uid: "u2", namespace: "apps", name: "gt-u2", reason: "CatchUp" }]],
    ]);
  });

  it("an observation that says nothing of folders proves none", () => {
    const d = new Driver();
    d.on({ type: "TargetsListed", targets: [listed("u1", "app")], folders: { commit: A, present: ["u1"] } });
    expect(d.on({ type: "Observed", tip: A, pushedByUs: false, folders: [] })).toEqual([]);
    expect(flushes(d.on({ type: "Observed", tip: A, pushedByUs: false, folders: ["u1"] }))).toHaveLength(1);
  });

  it("Git is ahead while a reason other than an adopt is pending or an attempt is out", () => {
    const d = new Driver();
    d.settle([listed("u1", "app")], A);
    expect(isGitAhead(d.state)).toBe(false);
    const out = d.on({ type: "Observed", tip: B, pushedByUs: false });
    expect(isGitAhead(d.state)).toBe(true);
    const [att] = sends(d.publish(out, B));
    d.on(report(att?.token ?? "", "app", "Succeeded", B));
    expect(isGitAhead(d.state)).toBe(false);
  });
});

describe("flush, then apply", () => {
  it("flush then send", () => {
    const d = new Driver();
    d.settle([listed("u1", "app")], A);
    d.on({ type: "WriteDecided", entryId: "w1", targetUid: "u1", createdObjects: [], editedObjects: [] });
    const out = d.on({ type: "Observed", tip: B, pushedByUs: false });
    expect(out).toEqual([{ type: "Flush", flush: 2 }]);
    // Nothing is sent until the publication of the flush answers, and then for the tip it produced.
    expect(sends(d.on({ type: "Published", upToMark: null, tip: B }))).toEqual([]);
    const sent = sends(d.on({ type: "Published", upToMark: "w1", tip: C, flush: 2 }));
    expect(sent.map((a) => a.commit)).toEqual([C]);
  });

  it("writes decided after the mark never hold the send, and are recorded in the window", () => {
    const d = new Driver();
    d.settle([listed("u1", "app")], A);
    const out = d.on({ type: "Observed", tip: B, pushedByUs: false });
    d.on({
      type: "WriteDecided",
      entryId: "late",
      targetUid: "u1",
      createdObjects: [],
      editedObjects: [{ ref: cm("x"), editedAt: iso(d.now) }],
    });
    const [att] = sends(d.publish(out, B));
    expect(att?.commit).toBe(B);
    const w = d.state.appliers["FluxClaim/apps/app"]?.windows.at(-1);
    expect(w?.edits.map((e) => e.object)).toEqual(["v1/ConfigMap/apps/x"]);
  });

  it("a flush that could not publish is tried again after a backoff", () => {
    const d = new Driver();
    d.settle([listed("u1", "app")], A);
    const [f] = flushes(d.on({ type: "Observed", tip: B, pushedByUs: false }));
    const failed = d.on({ type: "FlushFailed", flush: f?.type === "Flush" ? f.flush : -1 });
    expect(failed).toEqual([{ type: "ScheduleWake", at: d.now + 2_000 }]);
    expect(flushes(d.advance(2_000))).toHaveLength(1);
  });
});

describe("attempts and reports", () => {
  it("Stale gives back and re-decides at once at the current tip with no backoff", () => {
    const d = new Driver();
    d.settle([listed("u1", "app")], A);
    const [att] = sends(d.publish(d.on({ type: "Observed", tip: B, pushedByUs: false }), B));
    const out = d.on(report(att?.token ?? "", "app", "Stale"));
    expect(flushes(out)).toHaveLength(1);
    const [again] = sends(d.publish(out, C));
    expect(again?.commit).toBe(C);
    expect(again?.targets[0]?.reason).toBe("ForeignCommit");
  });

  it("any other non-success gives back (refusal only if still standing) and starts backoff", () => {
    const d = new Driver();
    d.settle(
      [listed("u1", "app", { onRefusal: "Reapply" }), listed("u2", "app", { onRefusal: "Reapply" })],
      A,
    );
    const sinceS = d.log.length; // every action from here: the flush a due applier asks for
    d.on({ type: "RefusalReceived", targetUid: "u1" });
    d.on({ type: "RefusalReceived", targetUid: "u2" });
    const [att] = sends(d.publish(d.log.slice(sinceS), A));
    expect(att?.targets.map((t) => t.reason)).toEqual(["Refusal", "Refusal"]);
    // u2 withdraws its consent while the attempt is out: its refusal no longer stands.
    d.on({
      type: "TargetsListed",
      targets: [listed("u1", "app", { onRefusal: "Reapply" }), listed("u2", "app")],
    });
    const out = d.on(report(att?.token ?? "", "app", "Failed"));
    expect(flushes(out)).toEqual([]);
    expect(out).toContainEqual({ type: "ScheduleWake", at: d.now + 2_000 });
    expect(d.state.appliers["FluxClaim/apps/app"]?.pending.byTarget).toEqual({ u1: ["Refusal"] });
    const [retry] = sends(d.publish(d.advance(2_000), A));
    expect(retry?.targets.map((t) => t.uid)).toEqual(["u1"]);
  });

  it("backoff is 2 s doubling to 5 min, and at least 15 s after Rejected", () => {
    expect([1, 2, 3, 4, 8, 9, 20].map((n) => backoffDelay(n, false))).toEqual([
      2_000,
      4_000,
      8_000,
      16_000,
      256_000,
      BACKOFF_MAX_MS,
      BACKOFF_MAX_MS,
    ]);
    expect(backoffDelay(1, true)).toBe(15_000);
    expect(backoffDelay(5, true)).toBe(32_000);
    const d = new Driver();
    d.settle([listed("u1", "app")], A);
    const [att] = sends(d.publish(d.on({ type: "Observed", tip: B, pushedByUs: false }), B));
    d.on(report(att?.token ?? "", "app", "Rejected"));
    expect(flushes(d.advance(14_999))).toEqual([]);
    expect(flushes(d.advance(1))).toHaveLength(1);
  });

  it("late, duplicate and unknown reports change nothing", () => {
    const d = new Driver();
    d.settle([listed("u1", "app")], A);
    const [att] = sends(d.publish(d.on({ type: "Observed", tip: B, pushedByUs: false }), B));
    d.on(report(att?.token ?? "", "app", "Running"));
    d.on(report(att?.token ?? "", "app", "Succeeded", B));
    const before = d.state;
    expect(d.on(report(att?.token ?? "", "app", "Failed"))).toEqual([]);
    expect(d.on(report("t-999", "app", "Succeeded", C))).toEqual([]);
    expect(d.state).toEqual(before);
  });
});

describe("the edit recheck", () => {
  const withPath = (uid: string, path: string) => listed(uid, "app", { path });
  /** A ForeignCommit for `tip` flushed, and published with the flush's inbox position `inboxMark`. */
  function sendFor(d: Driver, tip: string, inboxMark: string) {
    const out = d.on({ type: "Observed", tip, pushedByUs: false });
    const f = flushes(out)[0];
    if (f?.type !== "Flush") throw new Error("no flush");
    const upToMark = d.state.unpublished.at(-1)?.entryId ?? null;
    return sends(d.on({ type: "Published", flush: f.flush, upToMark, tip, inboxMark }));
  }
  const restale = (token: string) => {
    const r = report(token, "app", "Stale");
    if (r.type === "Report") r.report.reason = "EditedAfterFlush";
    return r;
  };

  it("an attempt carries the flush's inbox mark and the folders of every GitTarget naming its claim", () => {
    const d = new Driver();
    d.settle(
      [withPath("u1", "apps/one"), withPath("u2", "apps/two"), listed("u3", "other", { path: "x" })],
      A,
    );
    const [att] = sendFor(d, B, "1700000000000-3");
    expect(att?.editsAfter).toEqual({ mark: "1700000000000-3", folders: ["apps/one", "apps/two"] });
  });

  it("without the flush's inbox mark, or a folder to watch, an attempt carries no recheck", () => {
    const d = new Driver();
    d.settle([listed("u1", "app")], A);
    expect(sendFor(d, B, "5-0")[0]?.editsAfter).toBeUndefined();
    const e = new Driver();
    e.settle([withPath("u1", "apps")], A);
    expect(
      sends(e.publish(e.on({ type: "Observed", tip: B, pushedByUs: false }), B))[0]?.editsAfter,
    ).toBeUndefined();
  });

  it("a Stale for an edit after the flush mark is decided again at once, the next attempt carrying the recheck again (within the budget)", () => {
    const d = new Driver();
    d.settle([withPath("u1", "apps")], A);
    const [first] = sendFor(d, B, "1-0");
    expect(first?.editsAfter?.mark).toBe("1-0");
    const out = d.on(restale(first?.token ?? ""));
    // No backoff: the flush that carries the edit starts in the same step.
    expect(flushes(out)).toHaveLength(1);
    const a = () => d.state.appliers["FluxClaim/apps/app"];
    expect(a()?.failures).toBe(0);
    expect(a()?.restaleSince).toBe(d.now);
    const f = flushes(out)[0];
    if (f?.type !== "Flush") throw new Error("no flush");
    const [second] = sends(
      d.on({ type: "Published", flush: f.flush, upToMark: null, tip: C, inboxMark: "2-0" }),
    );
    expect(second?.commit).toBe(C);
    expect(second?.targets.map((t) => t.reason)).toEqual(["ForeignCommit"]);
    expect(second?.editsAfter).toEqual({ mark: "2-0", folders: ["apps"] });
    d.on(report(second?.token ?? "", "app", "Succeeded", C));
    expect(a()?.restaleSince).toBeNull();
    // The chain ended: the next one may recheck again.
    expect(sendFor(d, sha("d"), "3-0")[0]?.editsAfter).toEqual({ mark: "3-0", folders: ["apps"] });
  });

  it("continuous edits never starve an apply: 5 s after a chain's first restale its attempts go without the recheck; a plain Stale keeps the chain, any other end closes it", () => {
    const d = new Driver();
    d.settle([withPath("u1", "apps")], A);
    const a = () => d.state.appliers["FluxClaim/apps/app"];
    let [att] = sendFor(d, B, "1-0");
    let mark = 1;
    let restales = 0;
    // An edit lands before every write, a second apart: each attempt that may recheck ends Stale
    // for it, and the worker's publication of each edit moves the tip (a plain Stale).
    for (let round = 0; round < 15; round++) {
      const allowed = att?.editsAfter !== undefined;
      if (allowed) restales += 1;
      d.now += 1000;
      const out = d.on(allowed ? restale(att?.token ?? "") : report(att?.token ?? "", "app", "Stale"));
      const f = flushes(out)[0];
      if (f?.type !== "Flush") throw new Error("no flush");
      mark += 1;
      [att] = sends(
        d.on({ type: "Published", flush: f.flush, upToMark: null, tip: sha(mark), inboxMark: `${mark}-0` }),
      );
    }
    // Attempts sent at 0 … 5 s rechecked and restaled (the first restale at 1 s); from 6 s on
    // none carries the recheck, so an edit can no longer hold the apply.
    expect(restales).toBe(6);
    expect(att?.editsAfter).toBeUndefined();
    // A Failed ends the chain: the retry after the backoff may recheck again.
    d.on(report(att?.token ?? "", "app", "Failed"));
    expect(a()?.restaleSince).toBeNull();
    const f = flushes(d.advance(2_000))[0];
    if (f?.type !== "Flush") throw new Error("no flush");
    const [retry] = sends(
      d.on({ type: "Published", flush: f.flush, upToMark: null, tip: sha(mark), inboxMark: "9-0" }),
    );
    expect(retry?.editsAfter).toEqual({ mark: "9-0", folders: ["apps"] });
  });
});

describe("waking", () => {
  it("a timer that fires before the wake it was set for gets the same wake again", () => {
    const d = new Driver();
    d.settle([listed("u1", "app")], A);
    const [att] = sends(d.publish(d.on({ type: "Observed", tip: B, pushedByUs: false }), B));
    const failed = d.on(report(att?.token ?? "", "app", "Failed"));
    const wake = failed.find((a) => a.type === "ScheduleWake");
    expect(wake).toEqual({ type: "ScheduleWake", at: d.now + 2_000 });
    // One millisecond early: nothing is due yet, and the wake is asked for again.
    expect(d.advance(1_999)).toEqual([wake]);
    expect(flushes(d.advance(1))).toHaveLength(1);
  });
});

describe("the apply window", () => {
  it("the apply window: an applier's own write newer than the edit → Repair due for that applier + collision logged", () => {
    const { d, att, editAt } = windowed();
    const out = d.on(applierWrite("app", "x", iso(editAt + 1_000)));
    expect(out).toContainEqual(collisionOf(att?.token));
    expect(out).toContainEqual({ type: "RecordRepairPending", claim: fluxClaim("app").claim, pending: true });
    expect(d.log.filter((a) => a.type === "LogCollision")).toHaveLength(1);
    const done = d.on(report(att?.token ?? "", "app", "Succeeded", B));
    const [repair] = sends(d.publish(done, C));
    expect(repair?.targets[0]?.reason).toBe("Repair");
    const answered = d.on(report(repair?.token ?? "", "app", "Succeeded", C));
    expect(answered).toContainEqual({
      type: "RecordRepairPending",
      claim: fluxClaim("app").claim,
      pending: false,
    });
  });

  it("the apply window: the applier's write alone in the edit's second is over it; an edit in a later second is not", () => {
    const { d, editAt } = windowed();
    const collided = (out: ReturnType<Driver["on"]>) => out.some((a) => a.type === "LogCollision");
    expect(d.on(applierWrite("app", "y", iso(editAt + 5_000)))).toEqual([]);
    expect(d.on(applierWrite("app", "x", iso(editAt + 5_000), "kubectl-edit"))).toEqual([]);
    expect(d.on(applierWrite("app", "x", iso(editAt - 1_000)))).toEqual([]);
    expect(collided(d.on(applierWrite("app", "x", iso(editAt))))).toBe(true);
    expect(d.log.filter((a) => a.type === "LogCollision")).toHaveLength(1);
  });

  it("an edit that reaches the worker after the applier write over it is still a collision", () => {
    const { d, att, editAt } = sentForB();
    const collided = (out: ReturnType<Driver["on"]>) => out.some((a) => a.type === "LogCollision");
    // The edit was made on the cluster, the apply landed over it, and its write was judged first.
    expect(collided(d.on(applierWrite("app", "x", iso(editAt + 1_000))))).toBe(false);
    const decided = (id: string, at: number) =>
      d.on({
        type: "WriteDecided",
        entryId: id,
        targetUid: "u1",
        createdObjects: [],
        editedObjects: [{ ref: cm("x"), editedAt: iso(at) }],
      });
    // An edit made after that write is not under it; one made before (or in its second) is.
    expect(collided(decided("later", editAt + 2_000))).toBe(false);
    const out = decided("earlier", editAt);
    expect(out).toContainEqual(collisionOf(att?.token));
    expect(d.log.filter((a) => a.type === "LogCollision")).toHaveLength(1);
    const [repair] = sends(d.publish(d.on(report(att?.token ?? "", "app", "Succeeded", B)), C));
    expect(repair?.targets[0]?.reason).toBe("Repair");
  });

  // Soak seed 35006: an edit that is no save waits in its commit window (5 s idle). Its applier's
  // apply ran over it; only once the window closed was the edit decided, the collision found and
  // the Repair sent: 4.8 s after the apply ended, while the cluster showed the older value.
  it("an edit still in its open commit window is guarded as the worker reads it: the apply's end flushes at once", () => {
    const { d, att, editAt } = sentForB();
    const edited = [{ ref: cm("x"), editedAt: iso(editAt), arrivedAt: editAt }];
    // The apply landed over the edit and was judged before the worker read the edit.
    expect(d.on(applierWrite("app", "x", iso(editAt + 1_000)))).toEqual([]);
    d.advance(200);
    const gathered = d.on({ type: "WriteGathered", targetUid: "u1", editedObjects: edited });
    expect(gathered).toContainEqual(collisionOf(att?.token));
    expect(gathered).toContainEqual({
      type: "RecordRepairPending",
      claim: fluxClaim("app").claim,
      pending: true,
    });
    d.advance(300);
    const done = d.on(report(att?.token ?? "", "app", "Succeeded", B));
    expect(flushes(done)).toHaveLength(1);
    // The flush closes the commit window: the edit decided is the one already guarded, not a second collision.
    d.on({ type: "WriteDecided", entryId: "w", targetUid: "u1", createdObjects: [], editedObjects: edited });
    expect(d.log.filter((a) => a.type === "LogCollision")).toHaveLength(1);
    const [repair] = sends(d.publish(done, C, "w"));
    expect(repair?.targets[0]?.reason).toBe("Repair");
  });

  it("an applier write over an edit waiting in its commit window is a collision", () => {
    const { d, att, editAt } = sentForB();
    d.on({
      type: "WriteGathered",
      targetUid: "u1",
      editedObjects: [{ ref: cm("x"), editedAt: iso(editAt), arrivedAt: editAt }],
    });
    expect(d.on(applierWrite("app", "x", iso(editAt + 1_000)))).toContainEqual(collisionOf(att?.token));
  });

  // Soak --mirror seed 81039: the worker was killed just after an Argo CD apply ran over an edit
  // in the edit's second. The next owner read the edit from the inbox and decided it when its
  // commit window closed, 15 s later and after the apply window had closed: the edit was recorded
  // in no window, no Repair came, and the cluster kept the apply's older value for good.
  describe("an edit decided after the apply window it arrived in closed", () => {
    function appliedOver() {
      const d = new Driver();
      d.settle([listed("u1", "app")], A);
      const [att] = sends(d.publish(d.on({ type: "Observed", tip: B, pushedByUs: false }), B));
      const editAt = d.now;
      // The apply landed over the edit in its second and was judged before the edit was decided.
      d.on(applierWrite("app", "x", iso(editAt)));
      d.advance(500);
      d.on(report(att?.token ?? "", "app", "Succeeded", B));
      // The window closes 10 s after that report; the edit is decided 5 s after.
      d.advance(15_000);
      const decided = (arrivedAt?: number) =>
        d.on({
          type: "WriteDecided",
          entryId: "late",
          targetUid: "u1",
          createdObjects: [],
          editedObjects: [
            { ref: cm("x"), editedAt: iso(editAt), ...(arrivedAt !== undefined ? { arrivedAt } : {}) },
          ],
        });
      return { d, att, editAt, decided };
    }
    const collided = (out: ReturnType<Driver["on"]>) => out.some((a) => a.type === "LogCollision");

    it("arrived while the window was open: a collision, and a Repair once published", () => {
      const { d, att, editAt, decided } = appliedOver();
      const out = decided(editAt + 100);
      expect(out).toContainEqual(collisionOf(att?.token));
      const [repair] = sends(d.publish(out, C));
      expect(repair?.targets[0]?.reason).toBe("Repair");
    });

    it("arrived after the window closed (to the millisecond), or its arrival unknown: judged as of now, no collision", () => {
      // Closed 10 s after the report (at editAt + 10.5 s): an arrival a millisecond after is late.
      const late = appliedOver();
      expect(collided(late.decided(late.editAt + 10_501))).toBe(false);
      const closing = appliedOver();
      expect(collided(closing.decided(closing.editAt + 10_499))).toBe(true);
      expect(collided(appliedOver().decided())).toBe(false);
    });

    it("an arrival stamped later than now counts as now", () => {
      const { d, decided } = appliedOver();
      expect(collided(decided(d.now + 60_000))).toBe(false);
    });
  });

  it("the apply window closes 10 s after the operation completed", () => {
    const { d, att, editAt } = windowed();
    d.advance(2_000);
    d.on(report(att?.token ?? "", "app", "Succeeded", B));
    d.advance(9_999);
    expect(d.on(applierWrite("app", "x", iso(editAt + 2_000))).some((a) => a.type === "LogCollision")).toBe(
      true,
    );
    d.advance(1);
    expect(d.on(applierWrite("app", "x", iso(editAt + 1_000)))).toEqual([]);
  });

  it("a write in a second after the operation completed is not its apply", () => {
    const { d, att, editAt } = windowed();
    d.advance(1_000);
    d.on(report(att?.token ?? "", "app", "Succeeded", B));
    expect(d.on(applierWrite("app", "x", iso(editAt + 2_000)))).toEqual([]);
    expect(d.on(applierWrite("app", "x", iso(editAt + 1_000))).some((a) => a.type === "LogCollision")).toBe(
      true,
    );
  });

  it("edits decided while the window is open are guarded; an applier write older than the send is an edit", () => {
    const { d, editAt } = windowed();
    d.advance(3_000);
    d.on({
      type: "WriteDecided",
      entryId: "w2",
      targetUid: "u1",
      createdObjects: [],
      editedObjects: [{ ref: cm("z"), editedAt: iso(d.now) }],
    });
    expect(d.on(applierWrite("app", "z", iso(d.now + 1_000))).some((a) => a.type === "LogCollision")).toBe(
      true,
    );
    expect(d.on(applierWrite("app", "x", iso(editAt - 60_000)))).toEqual([]);
  });
});

describe("restart", () => {
  it("restart: baseline, converge pending, operations and repairPending restored from claim status", () => {
    const d = new Driver();
    d.on({
      type: "Restarted",
      tokenPrefix: "p2",
      claims: [
        {
          ...fluxClaim("app"),
          source: "flux-system/app",
          lastAppliedCommit: A,
          operation: {
            token: "old-7",
            phase: "Running",
            commit: B,
            targets: [{ uid: "u1", reason: "ForeignCommit" }],
          },
        },
        { ...fluxClaim("infra"), source: "flux-system/infra", lastAppliedCommit: A, repairPending: true },
      ],
    });
    d.on({ type: "TargetsListed", targets: [listed("u1", "app"), listed("u2", "infra")] });
    // Baseline at a tip the worker did not push: converge, never ForeignCommit.
    const out = d.on({ type: "Observed", tip: C, pushedByUs: false });
    const sent = sends(d.publish(out, C));
    expect(sent.map((a) => [a.claim.name, a.targets.map((t) => t.reason)])).toEqual([["infra", ["Repair"]]]);
    expect(sent[0]?.token).toBe("p2-1");
    // The recovered operation is out: its window is open, and its end gives back what it carried.
    // It was for B, older than the tip C the start found: overtaken, as by a foreign tip, so its
    // failure starts no backoff and the tip is decided at once.
    expect(d.state.appliers["FluxClaim/apps/app"]?.operation?.overtaken).toBe(true);
    const failed = d.on(report("old-7", "app", "Failed"));
    expect(d.state.appliers["FluxClaim/apps/app"]?.pending.byTarget.u1).toEqual([
      "ForeignCommit",
      "Converge",
    ]);
    expect(sends(d.publish(failed, C))[0]?.targets[0]?.reason).toBe("ForeignCommit");
  });

  it("a saved state survives JSON and keeps its reasons and backoff across a restart", () => {
    const d = new Driver();
    d.settle([listed("u1", "app", { onRefusal: "Reapply" })], A);
    const [att] = sends(d.publish(d.on({ type: "RefusalReceived", targetUid: "u1" }), A));
    d.on(report(att?.token ?? "", "app", "Failed"));
    const saved = JSON.parse(JSON.stringify(d.state));
    const out = d.on({ type: "Restarted", tokenPrefix: "p3", claims: [], saved });
    expect(out).toEqual([{ type: "ScheduleWake", at: d.now + 2_000 }]);
    expect(d.on({ type: "Observed", tip: A, pushedByUs: false })).toEqual([]);
    const [retry] = sends(d.publish(d.advance(2_000), A));
    expect(retry?.targets[0]?.reason).toBe("Refusal");
  });
  it("a state saved before pending writes were named by entryId keeps them by their old writeId, and drops the retired counters", () => {
    const d = new Driver();
    d.settle([listed("u1", "app")], A);
    d.on({
      type: "WriteDecided",
      entryId: "5-0",
      targetUid: "u1",
      createdObjects: [cm("x")],
      editedObjects: [],
    });
    const old = JSON.parse(JSON.stringify(d.state));
    old.unpublished = old.unpublished.map(({ entryId, ...w }: { entryId: string }) => ({
      ...w,
      writeId: entryId,
    }));
    Object.assign(old, { epoch: 7, collisions: 2, saves: [], dirty: false });
    d.on({ type: "Restarted", tokenPrefix: "p4", claims: [], saved: old });
    expect(d.state.unpublished.map((w) => w.entryId)).toEqual(["5-0"]);
    expect(Object.keys(d.state)).not.toContain("epoch");
    expect(Object.keys(d.state)).not.toContain("saves");
    // Its publication lands it: the object it created is adopted.
    d.on({ type: "Observed", tip: A, pushedByUs: false });
    d.on({ type: "Published", upToMark: "5-0", tip: B });
    expect(d.state.unpublished).toEqual([]);
    expect(d.state.appliers["FluxClaim/apps/app"]?.pending.byTarget.u1).toContain("Adopt");
  });
});

describe("webhook appliers", () => {
  const webhook = {
    claim: { kind: "WebhookClaim" as const, namespace: "apps", name: "deployer" },
    applier: {
      kind: "webhook" as const,
      namespace: "apps",
      name: "deployer",
      fieldManagers: ["playground-deployer"],
    },
  };
  const webhookListed = () =>
    listed("u1", "deployer", {
      claim: webhook.claim,
      applier: webhook.applier,
      source: "claim/WebhookClaim/apps/deployer",
    });

  it("a late write of the deployer's own field manager over a newer edit is withheld and makes a Repair due", () => {
    const { d, att, editAt } = windowed(webhookListed());
    const out = d.on(
      applierWrite("deployer", "x", iso(editAt + 1_000), "playground-deployer", webhook.claim),
    );
    expect(out).toContainEqual({ type: "RecordRepairPending", claim: webhook.claim, pending: true });
    const done = d.on(report(att?.token ?? "", "deployer", "Succeeded", B, webhook.claim));
    const [repair] = sends(d.publish(done, C));
    expect(repair?.applier.name).toBe("deployer");
    expect(repair?.targets[0]?.reason).toBe("Repair");
  });

  it("a write of a manager the claim does not name is not its apply: no Repair", () => {
    const { d, editAt } = windowed(webhookListed());
    for (const manager of ["kubectl", "kustomize-controller", "argocd-controller"]) {
      const out = d.on(applierWrite("deployer", "x", iso(editAt + 1_000), manager, webhook.claim));
      expect(out.filter((a) => a.type === "RecordRepairPending" || a.type === "LogCollision")).toEqual([]);
    }
  });
});

describe("a newer commit supersedes a failing one", () => {
  const KEY = "FluxClaim/apps/app";
  /** An applier that failed `n` times in a row at B (its backoff running), after settling at A. */
  function failing(n: number, kind: "flux" | "argocd" = "flux") {
    const d = new Driver();
    d.settle([kind === "flux" ? listed("u1", "app") : argoListed("u1", "app")], A);
    let out = d.on({ type: "Observed", tip: B, pushedByUs: false });
    for (let i = 0; i < n; i++) {
      const [att] = sends(d.publish(out, B));
      d.on(report(att?.token ?? "", "app", "Running", undefined, att?.claim));
      d.on({
        type: "Report",
        report: {
          type: "phase",
          token: att?.token ?? "",
          claim: att?.claim ?? fluxClaim("app").claim,
          branchKey: "k",
          phase: "Failed",
          at: iso(d.now),
          commit: B,
          reason: "BuildFailed",
          message: "no matches for kind Widget",
        },
      });
      if (i < n - 1) out = d.advance(backoffDelay(i + 1, false));
    }
    return d;
  }

  it("a foreign tip resets the backoff: the fix is sent at once, not after the 16 s the failures earned", () => {
    const d = failing(4);
    expect(d.state.appliers[KEY]?.notBefore).toBe(d.now + 16_000);
    const out = d.on({ type: "Observed", tip: C, pushedByUs: false });
    const [att] = sends(d.publish(out, C));
    expect(att?.commit).toBe(C);
    expect(att?.targets.map((t) => t.reason)).toEqual(["ForeignCommit"]);
  });

  it("a tip the worker pushed does not: it carries only edits the cluster runs, and cannot fix what failed", () => {
    const d = failing(3);
    expect(flushes(d.on({ type: "Published", upToMark: null, tip: C }))).toEqual([]);
    expect(flushes(d.advance(7_999))).toEqual([]);
    expect(flushes(d.advance(1))).toHaveLength(1);
  });

  it("an operation a foreign tip overtook ends without backoff, and the new tip goes at once", () => {
    const d = failing(2);
    const [att] = sends(d.publish(d.advance(4_000), B));
    d.on(report(att?.token ?? "", "app", "Running"));
    // The fix lands while the third attempt at B still runs.
    expect(flushes(d.on({ type: "Observed", tip: C, pushedByUs: false }))).toEqual([]);
    const out = d.on(report(att?.token ?? "", "app", "Failed", B));
    const [next] = sends(d.publish(out, C));
    expect(next?.commit).toBe(C);
    expect(d.state.appliers[KEY]?.failures).toBe(0);
  });

  it("Superseded gives back what the attempt carried and is decided again at once, never counted a success", () => {
    const d = failing(1, "argocd");
    const [att] = sends(d.publish(d.advance(2_000), B));
    const claim = att?.claim;
    d.on(report(att?.token ?? "", "app", "Running", undefined, claim));
    d.on({ type: "Observed", tip: C, pushedByUs: false });
    d.on({ type: "AncestryRead", token: att?.token ?? "", commit: B, tip: C, ancestry: "ancestor" });
    const out = d.on(report(att?.token ?? "", "app", "Superseded", B, claim));
    const a = d.state.appliers["ArgoCDClaim/apps/app"];
    expect(a?.lastAppliedCommit).toBe(A);
    const [next] = sends(d.publish(out, C));
    expect(next?.commit).toBe(C);
    expect(next?.targets.map((t) => t.reason)).toEqual(["ForeignCommit"]);
  });

  it("the claim says what it waits for: the commit, the attempt and when it comes, and nothing once it went", () => {
    const d = failing(2);
    const retries = d.log.filter((x) => x.type === "RecordRetry");
    expect(retries.at(-1)).toEqual({
      type: "RecordRetry",
      claim: fluxClaim("app").claim,
      retry: {
        by: "worker",
        commit: B,
        attempt: 3,
        at: d.now + 4_000,
        after: { phase: "Failed", commit: B, reason: "BuildFailed", message: "no matches for kind Widget" },
      },
    });
    // Written once per change: an unrelated step writes nothing.
    expect(d.on({ type: "Tick" }).filter((x) => x.type === "RecordRetry")).toEqual([]);
    const out = d.advance(4_000);
    expect(out.filter((x) => x.type === "RecordRetry")).toEqual([
      { type: "RecordRetry", claim: fluxClaim("app").claim, retry: null },
    ]);
    // A claim that never waited is told nothing.
    const quiet = new Driver();
    quiet.settle([listed("u1", "app")], A);
    expect(quiet.log.filter((x) => x.type === "RecordRetry")).toEqual([]);
  });

  it("and while Argo CD's own retry holds the operation, which of its attempts comes when", () => {
    const d = new Driver();
    d.settle([argoListed("u1", "app")], A);
    const [att] = sends(d.publish(d.on({ type: "Observed", tip: B, pushedByUs: false }), B));
    const at = d.now + 20_000;
    const out = d.on({
      type: "Report",
      report: {
        type: "phase",
        token: att?.token ?? "",
        claim: argoClaim("app").claim,
        branchKey: "k",
        phase: "Running",
        at: iso(d.now),
        reason: "Retrying",
        message: "one or more objects failed to apply. Retrying attempt #2 at 10:00AM.",
        retry: { attempt: 3, of: 6, at: iso(at) },
      },
    });
    expect(out.filter((x) => x.type === "RecordRetry")).toEqual([
      {
        type: "RecordRetry",
        claim: argoClaim("app").claim,
        retry: {
          by: "applier",
          commit: B,
          attempt: 3,
          of: 6,
          at,
          after: {
            phase: "Running",
            commit: B,
            message: "one or more objects failed to apply. Retrying attempt #2 at 10:00AM.",
          },
        },
      },
    ]);
    // The retry started: Argo CD reports it running again, with no wait.
    const again = d.on(report(att?.token ?? "", "app", "Running", undefined, argoClaim("app").claim));
    expect(again.filter((x) => x.type === "RecordRetry")).toEqual([
      { type: "RecordRetry", claim: argoClaim("app").claim, retry: null },
    ]);
  });
});
