/**
 * The one judge of watched applier writes (the watch plane's writes of an applier's own managers
 * alone): each case of the apply window, as the decision core answers it.
 */
import { describe, expect, it } from "vitest";
import {
  A,
  argoClaim,
  B,
  C,
  cm,
  Driver,
  fluxClaim,
  listed,
  report,
  sends,
} from "../../test/support/decisions.js";
import type { DecisionAction, DecisionEvent } from "./model.js";

const iso = (ms: number) => new Date(ms).toISOString();

function watched(
  object: string,
  writtenAt: number,
  manager = "kustomize-controller",
  id = "wa",
): DecisionEvent {
  return {
    type: "WatchedApplierWrite",
    writeId: id,
    targetUid: "u1",
    ref: cm(object),
    manager,
    writtenAt: iso(writtenAt),
  };
}

const edit = (id: string, object: string, at: number): DecisionEvent => ({
  type: "WriteDecided",
  entryId: id,
  targetUid: "u1",
  createdObjects: [],
  editedObjects: [{ ref: cm(object), editedAt: iso(at) }],
});

const settled = (out: DecisionAction[]) => out.filter((a) => a.type === "SettleWatchedWrite");
const collided = (out: DecisionAction[]) => out.some((a) => a.type === "LogCollision");

/** u1 (claim "app") settled at A, an edit of x decided, then the attempt for B sent at `sentAt`. */
function windowed() {
  const d = new Driver();
  d.settle([listed("u1", "app")], A);
  const out = d.on({ type: "Observed", tip: B, pushedByUs: false });
  const editAt = d.now;
  d.on(edit("w", "x", editAt));
  const [att] = sends(d.publish(out, B));
  return { d, att, sentAt: d.now, editAt };
}

describe("watched applier writes: one judge", () => {
  it("the apply landing on an object nobody edited in the window is not mirrored and makes nothing due", () => {
    const { d, sentAt } = windowed();
    const out = d.on(watched("y", sentAt + 1_000));
    expect(settled(out)).toEqual([
      {
        type: "SettleWatchedWrite",
        writeId: "wa",
        mirror: false,
        verdict: "not_mirrored",
        applierKind: "flux",
      },
    ]);
    expect(collided(out)).toBe(false);
    expect(out.some((a) => a.type === "RecordRepairPending")).toBe(false);
  });

  it("a late apply over a newer edit is withheld: not mirrored, a Repair due, the collision logged", () => {
    const { d, att, editAt } = windowed();
    const out = d.on(watched("x", editAt + 1_000));
    expect(settled(out)).toEqual([
      { type: "SettleWatchedWrite", writeId: "wa", mirror: false, verdict: "withheld", applierKind: "flux" },
    ]);
    expect(collided(out)).toBe(true);
    expect(out).toContainEqual({ type: "RecordRepairPending", claim: fluxClaim("app").claim, pending: true });
    const [repair] = sends(d.publish(d.on(report(att?.token ?? "", "app", "Succeeded", B)), C));
    expect(repair?.targets[0]?.reason).toBe("Repair");
  });

  it("an edit decided after the watched apply over it still collides (either order)", () => {
    const d = new Driver();
    d.settle([listed("u1", "app")], A);
    sends(d.publish(d.on({ type: "Observed", tip: B, pushedByUs: false }), B));
    const at = d.now;
    expect(settled(d.on(watched("x", at + 1_000)))[0]).toMatchObject({ mirror: false });
    expect(collided(d.on(edit("late-decided", "x", at)))).toBe(true);
  });

  it("an undo that leaves an older applier entry newest is mirrored as an edit", () => {
    const { d, sentAt } = windowed();
    d.advance(2_000);
    d.on(edit("w2", "z", d.now));
    // kubectl label tmp- after tmp=1: the applier's entry of its apply (1 s after the send) is newest.
    const out = d.on(watched("z", sentAt + 1_000));
    expect(settled(out)).toEqual([
      { type: "SettleWatchedWrite", writeId: "wa", mirror: true, verdict: "undo", applierKind: "flux" },
    ]);
    expect(collided(out)).toBe(false);
  });

  it("a delayed echo of the attempt before, arriving after the next was sent inside its grace, is still that apply", () => {
    const d = new Driver();
    d.settle([listed("u1", "app")], A);
    const [first] = sends(d.publish(d.on({ type: "Observed", tip: B, pushedByUs: false }), B));
    const firstSent = d.now;
    d.advance(2_000);
    d.on(report(first?.token ?? "", "app", "Succeeded", B));
    d.advance(3_000);
    const [second] = sends(d.publish(d.on({ type: "Observed", tip: C, pushedByUs: false }), C));
    expect(second).toBeDefined();
    const out = d.on(watched("y", firstSent + 1_000));
    expect(settled(out)).toEqual([
      {
        type: "SettleWatchedWrite",
        writeId: "wa",
        mirror: false,
        verdict: "not_mirrored",
        applierKind: "flux",
      },
    ]);
  });

  it("with no window open the applier's write is late and mirrored", () => {
    const d = new Driver();
    d.settle([listed("u1", "app")], A);
    d.advance(60_000);
    expect(settled(d.on(watched("x", d.now)))).toEqual([
      { type: "SettleWatchedWrite", writeId: "wa", mirror: true, verdict: "late", applierKind: "flux" },
    ]);
  });

  it("an applier entry older than the window's send is no apply of it: mirrored", () => {
    const { d, sentAt } = windowed();
    expect(settled(d.on(watched("x", sentAt - 60_000)))[0]).toMatchObject({ mirror: true, verdict: "late" });
  });

  it("a write by a manager that is not the folder's applier's, or to a folder no claim holds, is mirrored", () => {
    const { d, sentAt } = windowed();
    expect(settled(d.on(watched("y", sentAt, "argocd-controller")))[0]).toMatchObject({ mirror: true });
    const bare = new Driver();
    bare.settle([listed("u1", null)], A);
    expect(settled(bare.on(watched("y", bare.now)))[0]).toMatchObject({ mirror: true, verdict: "late" });
  });

  it("Argo CD's managers are judged for a folder an ArgoCDClaim holds", () => {
    const d = new Driver();
    const c = argoClaim("app");
    d.settle([listed("u1", "app", { claim: c.claim, applier: c.applier, source: "argocd/app" })], A);
    sends(d.publish(d.on({ type: "Observed", tip: B, pushedByUs: false }), B));
    expect(settled(d.on(watched("y", d.now, "argocd-application-controller")))[0]).toMatchObject({
      mirror: false,
      verdict: "not_mirrored",
    });
  });
});

describe("watched applier writes after a restart: the new owner judges as the last owner would", () => {
  const claimOf = (token: string, phase: "Running" | "Succeeded", requestedAt?: string) => ({
    ...fluxClaim("app"),
    source: "flux-system/app",
    lastAppliedCommit: A,
    operation: {
      token,
      phase,
      commit: B,
      targets: [{ uid: "u1", reason: "ForeignCommit" }],
      ...(requestedAt ? { requestedAt } : {}),
    },
  });
  const restartWith = (d: Driver, claims: ReturnType<typeof claimOf>[]) =>
    d.on({ type: "Restarted", tokenPrefix: "p2", claims, saved: JSON.parse(JSON.stringify(d.state)) });

  it("an operation that ended before the restart keeps its window and grace: its echo is not mirrored", () => {
    const { d, att, sentAt } = windowed();
    d.advance(2_000);
    d.on(report(att?.token ?? "", "app", "Succeeded", B));
    d.advance(4_000);
    restartWith(d, [claimOf(att?.token ?? "", "Succeeded")]);
    expect(settled(d.on(watched("y", sentAt + 1_000)))[0]).toMatchObject({ verdict: "not_mirrored" });
    // The grace still runs from the end the last owner saw, not from the restart.
    d.advance(6_000);
    expect(settled(d.on(watched("y", sentAt + 1_000, undefined, "wb")))[0]).toMatchObject({
      verdict: "late",
    });
  });

  it("a write that reached the inbox inside the grace is judged as of its arrival, however late an owner reads it", () => {
    const { d, att, sentAt } = windowed();
    d.advance(2_000);
    d.on(report(att?.token ?? "", "app", "Succeeded", B));
    const end = d.now;
    d.advance(4_000);
    const arrivedAt = d.now;
    d.advance(8_000);
    restartWith(d, [claimOf(att?.token ?? "", "Succeeded")]);
    const held = { ...watched("y", sentAt + 1_000), arrivedAt } as DecisionEvent;
    expect(settled(d.on(held))[0]).toMatchObject({ verdict: "not_mirrored" });
    // Arriving after the grace it is late, and so is one judged with no arrival time now.
    expect(
      settled(d.on({ ...held, writeId: "wb", arrivedAt: end + 10_000 } as DecisionEvent))[0],
    ).toMatchObject({
      verdict: "late",
    });
    expect(settled(d.on(watched("y", sentAt + 1_000, undefined, "wc")))[0]).toMatchObject({
      verdict: "late",
    });
  });

  it("an operation whose end no owner saw (its report lost with the last owner) ends at the restart: its grace runs from then", () => {
    const { d, att, sentAt } = windowed();
    d.advance(5_000);
    restartWith(d, [claimOf(att?.token ?? "", "Succeeded")]);
    const w = d.state.appliers["FluxClaim/apps/app"]?.windows.find((x) => x.token === att?.token);
    expect([w?.sentAt, w?.completedAt]).toEqual([sentAt, d.now]);
    d.advance(9_000);
    expect(settled(d.on(watched("y", sentAt + 1_000)))[0]).toMatchObject({ verdict: "not_mirrored" });
    // Its edits are still guarded: a late apply over the edit is withheld.
    expect(settled(d.on(watched("x", sentAt, undefined, "wb")))[0]).toMatchObject({ verdict: "withheld" });
  });

  it("an operation still out keeps the window its attempt opened: a write before the restart is its apply", () => {
    const { d, att, sentAt } = windowed();
    d.advance(5_000);
    restartWith(d, [claimOf(att?.token ?? "", "Running")]);
    expect(d.state.appliers["FluxClaim/apps/app"]?.operation?.sentAt).toBe(sentAt);
    expect(settled(d.on(watched("y", sentAt + 1_000)))[0]).toMatchObject({ verdict: "not_mirrored" });
  });

  it("with no saved state, an operation still out opens its window when the executor recorded it", () => {
    const d = new Driver();
    const requested = d.now - 5_000;
    d.on({ type: "Restarted", tokenPrefix: "p2", claims: [claimOf("old-1", "Running", iso(requested))] });
    d.on({ type: "TargetsListed", targets: [listed("u1", "app")] });
    expect(settled(d.on(watched("y", requested + 1_000)))[0]).toMatchObject({ verdict: "not_mirrored" });
  });
});

describe("watched applier writes of a webhook endpoint: its claim's field managers", () => {
  const claim = { kind: "WebhookClaim" as const, namespace: "apps", name: "deployer" };
  const applier = {
    kind: "webhook" as const,
    namespace: "apps",
    name: "deployer",
    fieldManagers: ["deployer"],
  };

  function webhookWindowed() {
    const d = new Driver();
    d.settle([listed("u1", "deployer", { claim, applier, source: "claim/WebhookClaim/apps/deployer" })], A);
    const out = d.on({ type: "Observed", tip: B, pushedByUs: false });
    const editAt = d.now;
    d.on(edit("w", "x", editAt));
    sends(d.publish(out, B));
    return { d, sentAt: d.now, editAt };
  }

  it("the deployer's own apply landing is not mirrored; its late apply over a newer edit is withheld", () => {
    const { d, sentAt, editAt } = webhookWindowed();
    const landing = settled(d.on(watched("y", sentAt + 1_000, "deployer", "wa")));
    expect(landing.map((a) => a.type === "SettleWatchedWrite" && a.verdict)).toEqual(["not_mirrored"]);
    const late = d.on(watched("x", editAt + 1_000, "deployer", "wb"));
    expect(settled(late).map((a) => a.type === "SettleWatchedWrite" && a.verdict)).toEqual(["withheld"]);
    expect(late).toContainEqual({ type: "RecordRepairPending", claim, pending: true });
  });

  it("a manager the claim does not name is mirrored as a late write, never judged an echo", () => {
    const { d, sentAt } = webhookWindowed();
    const out = settled(d.on(watched("y", sentAt + 1_000, "kustomize-controller")));
    expect(out.map((a) => a.type === "SettleWatchedWrite" && a.mirror)).toEqual([true]);
  });
});
