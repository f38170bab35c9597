/**
 * A new owner of the branch and the operation the last one started: followed from the saved
 * state, the attempts queue and the claim's record, never sent again; an older commit's operation
 * waits for its end (or is superseded); a lost end report is made good from the claim's record.
 */
import { describe, expect, it } from "vitest";
import {
  A,
  argoClaim,
  argoListed,
  B,
  C,
  Driver,
  flushes,
  fluxClaim,
  listed,
  report,
  sends,
} from "../../test/support/decisions.js";
import { OPERATION_PHASES } from "../contract.js";
import type { ClaimStatusSnapshot, DecisionState, PendingKind } from "./model.js";
import {
  ATTEMPT_CHECK_AFTER_MS,
  operationsToCheck,
  type SavedOperationFate,
  savedOperationFate,
} from "./step.js";
import { ancestryReadsAsked } from "./supersede.js";

const KEY = "FluxClaim/apps/app";

type Record = NonNullable<ClaimStatusSnapshot["operation"]>;
const recordOf = (token: string, phase: Record["phase"], commit = B): Record => ({
  token,
  phase,
  commit,
  targets: [{ uid: "u1", reason: "ForeignCommit" }],
});
const claimOf = (record?: Record, extra: Partial<ClaimStatusSnapshot> = {}): ClaimStatusSnapshot => ({
  ...fluxClaim("app"),
  source: "flux-system/app",
  lastAppliedCommit: A,
  ...(record ? { operation: record } : {}),
  ...extra,
});

/**
 * Target u1 names claim "app", applied at A; a foreign push B is sent as attempt `token` (its
 * state saved as the last owner left it, the attempt not reported on yet).
 */
function sentByLastOwner() {
  const d = new Driver();
  d.settle([listed("u1", "app")], A);
  const [att] = sends(d.publish(d.on({ type: "Observed", tip: B, pushedByUs: false }), B));
  if (!att) throw new Error("no attempt");
  const saved = JSON.parse(JSON.stringify(d.state)) as DecisionState;
  return { d, att, saved };
}

/** A new owner (prefix n) restarts from `saved` with the claims as its listing read them, then lists and observes. */
function takeOver(
  d: Driver,
  saved: DecisionState | undefined,
  claims: ClaimStatusSnapshot[],
  queued: string[] = [],
  tip = B,
) {
  d.on({ type: "Restarted", tokenPrefix: "n", claims, ...(saved ? { saved } : {}), queued });
  d.on({ type: "TargetsListed", targets: [listed("u1", "app")] });
  return d.on({ type: "Observed", tip, pushedByUs: false });
}

const pendingOf = (d: Driver): PendingKind[] => {
  const p = d.state.appliers[KEY]?.pending;
  return [...(p?.all ?? []), ...Object.values(p?.byTarget ?? {}).flat()];
};

describe("what a restart makes of the operation a saved state shows out", () => {
  it("follows it while its claim records it in flight, or records none while its attempt is queued; answers a success; gives back anything else", () => {
    // Written from the rules by hand, for every phase a record may show.
    const inFlight = (p: Record["phase"]) => !["Succeeded", "Failed", "Superseded"].includes(p);
    const oracle = (r: Record | undefined, queued: boolean): SavedOperationFate => {
      if (r?.token === "t")
        return inFlight(r.phase) ? "follow" : r.phase === "Succeeded" ? "answered" : "giveBack";
      if (r !== undefined && inFlight(r.phase)) return "giveBack";
      return queued ? "follow" : "giveBack";
    };
    const records: Array<Record | undefined> = [
      undefined,
      ...OPERATION_PHASES.flatMap((p) => [recordOf("t", p), recordOf("other", p)]),
    ];
    let cases = 0;
    for (const r of records)
      for (const queued of [false, true]) {
        expect(savedOperationFate("t", r, queued), `${r?.token} ${r?.phase} queued=${queued}`).toBe(
          oracle(r, queued),
        );
        cases += 1;
      }
    expect(cases).toBe(2 * (1 + 2 * OPERATION_PHASES.length));
    // The cases that matter, spelled out.
    expect(savedOperationFate("t", undefined, true)).toBe("follow");
    expect(savedOperationFate("t", undefined, false)).toBe("giveBack");
    expect(savedOperationFate("t", recordOf("t", "Running"), false)).toBe("follow");
    expect(savedOperationFate("t", recordOf("t", "Succeeded"), true)).toBe("answered");
    expect(savedOperationFate("t", recordOf("t", "Failed"), true)).toBe("giveBack");
    expect(savedOperationFate("t", recordOf("other", "Running"), true)).toBe("giveBack");
    expect(savedOperationFate("t", recordOf("other", "Succeeded", A), true)).toBe("follow");
  });
});

describe("a takeover while the last owner's attempt is out", () => {
  it("its attempt queued and not yet recorded on the claim: followed, nothing sent for its commit, its end reports answer it", () => {
    const { d, att, saved } = sentByLastOwner();
    const from = d.log.length;
    const out = takeOver(d, saved, [claimOf()], [att.token]);
    const a = d.state.appliers[KEY];
    expect(a?.operation).toMatchObject({ token: att.token, commit: B, phase: "Sent", inherited: true });
    expect(operationsToCheck(d.state, d.now).length > 0).toBe(true);
    // Its window stays open from its send, guarding what it guarded.
    expect(a?.windows.find((w) => w.token === att.token)?.completedAt).toBeNull();
    expect(flushes(out)).toEqual([]);
    // The executor records it a moment later and reports as it goes: the new owner's attempt is it.
    expect(flushes(d.on(report(att.token, "app", "Running")))).toEqual([]);
    expect(d.state.appliers[KEY]?.operation?.phase).toBe("Running");
    const end = d.on(report(att.token, "app", "Succeeded", B));
    expect(flushes(end)).toEqual([]);
    expect(d.state.appliers[KEY]?.lastAppliedCommit).toBe(B);
    expect(d.state.appliers[KEY]?.operation).toBeNull();
    // The baseline's converge of B asks nothing: B is what it applied.
    expect(pendingOf(d)).toEqual([]);
    expect(sends(d.log.slice(from))).toEqual([]);
    expect(operationsToCheck(d.state, d.now).length > 0).toBe(false);
  });

  it("ended without a record after all (Stale): what it carried is decided again at once", () => {
    const { d, att, saved } = sentByLastOwner();
    takeOver(d, saved, [claimOf()], [att.token]);
    const out = d.on(report(att.token, "app", "Stale"));
    const [next] = sends(d.publish(out, B));
    expect(next?.targets.map((t) => t.reason)).toEqual(["ForeignCommit"]);
    expect(next?.token).toBe("n-1");
  });

  it("its attempt no longer queued and not on the claim (never queued, or ended without a record): its reasons are given back and sent at the baseline", () => {
    const { d, att, saved } = sentByLastOwner();
    const out = takeOver(d, saved, [claimOf()], []);
    expect(d.state.appliers[KEY]?.operation).toBeNull();
    const [next] = sends(d.publish(out, B));
    expect(next?.token).toBe("n-1");
    expect(next?.token).not.toBe(att.token);
    expect(next?.targets.map((t) => t.reason)).toEqual(["ForeignCommit"]);
  });

  it("recorded in flight on the claim: followed with what it carried as sent, not as the claim's targets say", () => {
    const { d, att, saved } = sentByLastOwner();
    // Sent for every GitTarget naming the claim; the claim lists it by target.
    const carried = saved.appliers[KEY]?.operation?.carried;
    expect(carried).toEqual({ all: ["ForeignCommit"], byTarget: {} });
    d.advance(3_000);
    d.on({ type: "Restarted", tokenPrefix: "n", claims: [claimOf(recordOf(att.token, "Running"))], saved });
    const op = d.state.appliers[KEY]?.operation;
    expect(op).toMatchObject({ token: att.token, phase: "Running", inherited: true });
    expect(op?.sentAt).toBe(Date.parse(att.sentAt));
    expect(op?.carried).toEqual(carried);
  });

  it("a queued attempt while the claim records another operation in flight: that one is out, the attempt's reasons wait for its end", () => {
    const { d, att, saved } = sentByLastOwner();
    const out = takeOver(d, saved, [claimOf(recordOf("older-3", "Running", A))], [att.token]);
    expect(d.state.appliers[KEY]?.operation?.token).toBe("older-3");
    expect(flushes(out)).toEqual([]);
    expect(pendingOf(d)).toContain("ForeignCommit");
    // Its end (a Succeeded of A) lets the given-back reasons go, for the tip.
    const [next] = sends(d.publish(d.on(report("older-3", "app", "Succeeded", A)), B));
    expect(next?.commit).toBe(B);
    expect(next?.targets.map((t) => t.reason)).toEqual(["ForeignCommit"]);
  });

  it("a recorded operation whose sidecar is gone is bounded by the sidecar's own timers: the claim reconciler's end (Failed, OperationUnfollowed) is its end", () => {
    const { d, att, saved } = sentByLastOwner();
    takeOver(d, saved, [claimOf(recordOf(att.token, "Running"))]);
    expect(d.state.appliers[KEY]?.operation?.token).toBe(att.token);
    expect(d.advance(10 * 60_000).filter((x) => x.type === "Flush")).toEqual([]);
    // A minute unfollowed, the next sidecar process settles it and reports it Failed.
    const ended = d.on({
      type: "Report",
      report: {
        type: "phase",
        token: att.token,
        claim: fluxClaim("app").claim,
        branchKey: d.state.branch.key,
        phase: "Failed",
        at: new Date(d.now).toISOString(),
        reason: "OperationUnfollowed",
      },
    });
    expect(flushes(ended)).toEqual([]);
    expect(d.state.appliers[KEY]?.lastEnd?.reason).toBe("OperationUnfollowed");
    // Decided again after the backoff a failure earns, like any end.
    const [next] = sends(d.publish(d.advance(2_000), B));
    expect(next?.targets.map((t) => t.reason)).toEqual(["ForeignCommit"]);
  });
});

describe("an operation for an older commit than the tip a new owner finds", () => {
  it("waits for its end, then the tip is decided at once; for the saved tip itself, a failure backs off as before", () => {
    // The tip moved (C) while no owner watched: older than what is asked now, overtaken.
    const moved = sentByLastOwner();
    const out = takeOver(moved.d, moved.saved, [claimOf(recordOf(moved.att.token, "Running"))], [], C);
    expect(flushes(out)).toEqual([]);
    expect(moved.d.state.appliers[KEY]?.operation?.overtaken).toBe(true);
    const [next] = sends(moved.d.publish(moved.d.on(report(moved.att.token, "app", "Failed")), C));
    expect(next?.commit).toBe(C);

    // The tip the last owner saw (B): its own attempt, judged as it would have.
    const same = sentByLastOwner();
    takeOver(same.d, same.saved, [claimOf(recordOf(same.att.token, "Running"))], [], B);
    expect(same.d.state.appliers[KEY]?.operation?.overtaken).toBeUndefined();
    expect(flushes(same.d.on(report(same.att.token, "app", "Failed")))).toEqual([]);
    expect(same.d.state.appliers[KEY]?.notBefore).toBe(same.d.now + 2_000);
  });

  it("a baseline that is our own publication overtakes nothing", () => {
    const { d, att, saved } = sentByLastOwner();
    d.on({ type: "Restarted", tokenPrefix: "n", claims: [claimOf(recordOf(att.token, "Running"))], saved });
    d.on({ type: "TargetsListed", targets: [listed("u1", "app")] });
    d.on({ type: "Published", upToMark: null, tip: C });
    expect(d.state.appliers[KEY]?.operation?.overtaken).toBeUndefined();
  });

  it("an Argo CD operation superseded by the tip is asked to end (the rule of queue/decide/supersede.ts)", () => {
    const d = new Driver();
    const claim = { ...argoClaim("app"), source: "argocd/app", lastAppliedCommit: A };
    d.on({
      type: "Restarted",
      tokenPrefix: "n",
      claims: [{ ...claim, operation: { ...recordOf("old-2", "Running"), commit: B } }],
    });
    d.on({ type: "TargetsListed", targets: [argoListed("u1", "app")] });
    expect(flushes(d.on({ type: "Observed", tip: C, pushedByUs: false }))).toEqual([]);
    expect(ancestryReadsAsked(d.state)).toEqual([
      { key: "ArgoCDClaim/apps/app", token: "old-2", commit: B, tip: C },
    ]);
    const asked = d.on({ type: "AncestryRead", token: "old-2", commit: B, tip: C, ancestry: "ancestor" });
    expect(asked.filter((x) => x.type === "EndSuperseded")).toEqual([
      {
        type: "EndSuperseded",
        claim: argoClaim("app").claim,
        applier: argoClaim("app").applier,
        token: "old-2",
        commit: B,
        tip: C,
      },
    ]);
    // Its Superseded end lets the tip go at once.
    const [next] = sends(d.publish(d.on(report("old-2", "app", "Superseded", B, argoClaim("app").claim)), C));
    expect(next?.commit).toBe(C);
  });
});

describe("the claim's record of an inherited operation, read at each listing", () => {
  const inherited = () => {
    const { d, att, saved } = sentByLastOwner();
    takeOver(d, saved, [claimOf()], [att.token]);
    return { d, att };
  };
  const read = (d: Driver, record?: Record) => d.on({ type: "ClaimsRead", claims: [claimOf(record)] });

  it("moves it out of Sent once recorded", () => {
    const { d, att } = inherited();
    read(d, recordOf(att.token, "Requested"));
    expect(d.state.appliers[KEY]?.operation?.phase).toBe("Requested");
    // Only out of Sent: the reports say the rest (a cache a step behind never moves it back).
    d.on(report(att.token, "app", "Running"));
    read(d, recordOf(att.token, "Requested"));
    expect(d.state.appliers[KEY]?.operation?.phase).toBe("Running");
  });

  it("an end its report brings first is the end; the record seen after changes nothing", () => {
    const { d, att } = inherited();
    read(d, recordOf(att.token, "Succeeded"));
    // The first sighting waits for the report.
    expect(d.state.appliers[KEY]?.operation?.token).toBe(att.token);
    d.on(report(att.token, "app", "Succeeded", B));
    expect(d.state.appliers[KEY]?.lastAppliedCommit).toBe(B);
    const before = JSON.stringify(d.state);
    expect(read(d, recordOf(att.token, "Succeeded"))).toEqual([]);
    expect(JSON.stringify(d.state)).toBe(before);
  });

  it("a report lost: the next listing still showing the end ends it as its report would", () => {
    const { d, att } = inherited();
    read(d, recordOf(att.token, "Succeeded"));
    read(d, recordOf(att.token, "Succeeded"));
    expect(d.state.appliers[KEY]?.operation).toBeNull();
    expect(d.state.appliers[KEY]?.lastAppliedCommit).toBe(B);
    expect(pendingOf(d)).toEqual([]);

    const failed = inherited();
    read(failed.d, recordOf(failed.att.token, "Failed"));
    read(failed.d, recordOf(failed.att.token, "Failed"));
    expect(failed.d.state.appliers[KEY]?.operation).toBeNull();
    expect(failed.d.state.appliers[KEY]?.failures).toBe(1);
    expect(pendingOf(failed.d)).toContain("ForeignCommit");
  });

  it("two sightings of one end are needed, in a row: another end, a record in flight or none of it between start over", () => {
    const { d, att } = inherited();
    for (const between of [recordOf(att.token, "Failed"), recordOf(att.token, "Running"), undefined]) {
      read(d, recordOf(att.token, "Succeeded"));
      read(d, between);
      expect(d.state.appliers[KEY]?.operation?.token).toBe(att.token);
    }
    read(d, recordOf(att.token, "Succeeded"));
    expect(d.state.appliers[KEY]?.operation?.token).toBe(att.token);
    read(d, recordOf(att.token, "Succeeded"));
    expect(d.state.appliers[KEY]?.lastAppliedCommit).toBe(B);
  });

  it("never ends an operation this owner sent a moment ago, nor reads a record of another token", () => {
    const { d } = inherited();
    d.on(report(d.state.appliers[KEY]?.operation?.token ?? "", "app", "Succeeded", B));
    // The owner's own attempt for C.
    const [own] = sends(d.publish(d.on({ type: "Observed", tip: C, pushedByUs: false }), C));
    if (!own) throw new Error("no attempt");
    expect(operationsToCheck(d.state, d.now).length > 0).toBe(false);
    read(d, recordOf(own.token, "Succeeded", C));
    read(d, recordOf(own.token, "Succeeded", C));
    expect(d.state.appliers[KEY]?.operation?.token).toBe(own.token);

    const other = inherited();
    read(other.d, recordOf("someone-else", "Succeeded"));
    read(other.d, recordOf("someone-else", "Succeeded"));
    expect(other.d.state.appliers[KEY]?.operation?.token).toBe(other.att.token);
  });
});

describe("a check of an operation this owner sent long ago: every attempt sent ends", () => {
  /** Target u1 on claim "app" applied at A; a foreign push B sent as `att`, then `ms` pass. */
  const sentAgo = (ms: number) => {
    const { d, att } = sentByLastOwner();
    d.advance(ms);
    return { d, att };
  };
  const check = (d: Driver, queued: string[] | undefined, record?: Record) =>
    d.on({ type: "ClaimsRead", claims: [claimOf(record)], ...(queued ? { queued } : {}) });
  const op = (d: Driver) => d.state.appliers[KEY]?.operation;

  it("is checked from ATTEMPT_CHECK_AFTER_MS after its send", () => {
    const young = sentAgo(ATTEMPT_CHECK_AFTER_MS - 1);
    expect(operationsToCheck(young.d.state, young.d.now)).toEqual([]);
    check(young.d, []);
    check(young.d, []);
    expect(op(young.d)?.token).toBe(young.att.token);
    const old = sentAgo(ATTEMPT_CHECK_AFTER_MS);
    expect(operationsToCheck(old.d.state, old.d.now)).toEqual([{ kind: "flux", token: old.att.token }]);
  });

  it("neither queued nor recorded at two checks in a row: ended RequestFailed (AttemptLost), its reasons given back", () => {
    const { d, att } = sentAgo(ATTEMPT_CHECK_AFTER_MS);
    check(d, []);
    expect(op(d)).toMatchObject({ token: att.token, missing: true });
    const ended = check(d, [], recordOf("someone-else", "Succeeded", A));
    expect(op(d)).toBeNull();
    expect(ended.filter((x) => x.type === "LogAttemptLost")).toEqual([
      {
        type: "LogAttemptLost",
        claim: fluxClaim("app").claim,
        applier: fluxClaim("app").applier,
        token: att.token,
        commit: B,
      },
    ]);
    expect(d.state.appliers[KEY]?.lastEnd).toMatchObject({
      phase: "RequestFailed",
      reason: "AttemptLost",
      commit: B,
    });
    expect(pendingOf(d)).toContain("ForeignCommit");
    // After the backoff of a first failure, it goes again.
    const [again] = sends(d.publish(d.advance(2_000), B));
    expect(again?.commit).toBe(B);
    expect(again?.token).not.toBe(att.token);
  });

  it("queued at either check, recorded at either, or nothing known of the queues: never taken for lost", () => {
    for (const between of [
      { queued: [] as string[] | undefined, record: recordOf("other", "Running") },
      { queued: ["x"], record: undefined },
    ]) {
      // Queued (waiting behind other attempts, or taken and not yet recorded) between two misses.
      const q = sentAgo(ATTEMPT_CHECK_AFTER_MS);
      check(q.d, between.queued);
      check(q.d, [q.att.token]);
      expect(op(q.d)?.missing).toBeUndefined();
      check(q.d, []);
      expect(op(q.d)?.token).toBe(q.att.token);
      // Recorded in flight between two misses.
      const r = sentAgo(ATTEMPT_CHECK_AFTER_MS);
      check(r.d, []);
      check(r.d, [], recordOf(r.att.token, "Running"));
      expect(op(r.d)).toMatchObject({ token: r.att.token, phase: "Running" });
      check(r.d, []);
      expect(op(r.d)?.token).toBe(r.att.token);
    }
    const unknown = sentAgo(ATTEMPT_CHECK_AFTER_MS);
    for (let i = 0; i < 4; i++) check(unknown.d, undefined);
    expect(op(unknown.d)?.token).toBe(unknown.att.token);
  });

  it("its end recorded at two checks while its report never comes: ended as the report would have", () => {
    const { d, att } = sentAgo(ATTEMPT_CHECK_AFTER_MS);
    check(d, [], recordOf(att.token, "Succeeded"));
    expect(op(d)?.token).toBe(att.token);
    check(d, [], recordOf(att.token, "Succeeded"));
    expect(op(d)).toBeNull();
    expect(d.state.appliers[KEY]?.lastAppliedCommit).toBe(B);
    expect(pendingOf(d)).toEqual([]);
  });

  it("an earlier owner's attempt followed because it was queued, gone from the queue and never recorded: lost too", () => {
    const { d, att, saved } = sentByLastOwner();
    takeOver(d, saved, [claimOf()], [att.token]);
    expect(op(d)).toMatchObject({ token: att.token, inherited: true });
    check(d, [att.token]);
    check(d, []);
    check(d, []);
    expect(op(d)).toBeNull();
    expect(d.state.appliers[KEY]?.lastEnd).toMatchObject({ phase: "RequestFailed", reason: "AttemptLost" });
  });
});
