import { describe, expect, it } from "vitest";
import { StatusReason } from "../../queue/crds/reasons.js";
import type { ExternalCheck } from "../applier-kind.js";
import type { Eligibility, TargetView } from "./eligibility.js";
import { type ClaimFacts, planClaim, planHold, UNDECIDED_REQUEUE_MS } from "./plan.js";
import type { Standing } from "./ranking.js";

const target: TargetView = {
  uid: "u1",
  namespace: "team-a",
  name: "web",
  deleting: false,
  branch: "main",
  providerRef: { name: "repo" },
};
const eligibilities: Record<Eligibility["state"], Eligibility> = {
  NotReferenced: { state: "NotReferenced", verdicts: [] },
  Bound: { state: "Bound", eligible: [target], verdicts: [{ target, verdict: "Eligible" }] },
  Undecided: { state: "Undecided", reason: StatusReason.NotBound, message: "provider unknown", verdicts: [] },
  Refused: {
    state: "Refused",
    reason: StatusReason.ApplierNamespaceNotAllowed,
    message: "no grant",
    verdicts: [],
  },
};
const standings: Record<Standing["standing"], Standing> = {
  Holder: { standing: "Holder" },
  Waiting: { standing: "Waiting", holder: "team-b/first" },
  NotInLine: { standing: "NotInLine" },
};

/** What one condition says, in a line a table can hold. */
const said = (c: { type: string; status: string; reason: string }) => `${c.type}=${c.status}/${c.reason}`;

function summary(f: ClaimFacts): string {
  const p = planClaim(f);
  if (p.act === "Check") return "Check";
  const conditions = p.conditions.map(said).join(" ");
  if (p.act === "Wait") return `Wait ${p.requeueMs} ${conditions}`;
  return `Release${p.handBack ? "+handBack" : ""} ${conditions}`.trim();
}

describe("planClaim: every combination of the facts", () => {
  // The expected plan for each (eligibility, standing) pair, for a claim that is not deleting, has
  // no finalizer and did not give up; the variations below change one fact at a time.
  const base: Record<string, string> = {
    "NotReferenced Holder":
      "Release Ready=True/NotReferenced Configured=Unknown/NotReferenced InControl=False/NotReferenced",
    "NotReferenced Waiting":
      "Release Ready=True/NotReferenced Configured=Unknown/NotReferenced Configured=False/HeldByAnotherClaim Ready=False/HeldByAnotherClaim InControl=False/HeldByAnotherClaim",
    "NotReferenced NotInLine":
      "Release Ready=True/NotReferenced Configured=Unknown/NotReferenced InControl=False/NotReferenced",
    "Bound Holder": "Check",
    "Bound Waiting":
      "Release Configured=False/HeldByAnotherClaim Ready=False/HeldByAnotherClaim InControl=False/HeldByAnotherClaim",
    "Bound NotInLine": "Release InControl=False/NotConfigured",
    "Undecided Holder": `Wait ${UNDECIDED_REQUEUE_MS} Ready=Unknown/NotBound Configured=Unknown/NotBound`,
    "Undecided Waiting":
      "Release Ready=Unknown/NotBound Configured=Unknown/NotBound Configured=False/HeldByAnotherClaim Ready=False/HeldByAnotherClaim InControl=False/HeldByAnotherClaim",
    "Undecided NotInLine":
      "Release Ready=Unknown/NotBound Configured=Unknown/NotBound InControl=False/NotConfigured",
    "Refused Holder":
      "Release Ready=False/ApplierNamespaceNotAllowed Configured=False/ApplierNamespaceNotAllowed InControl=False/NotConfigured",
    "Refused Waiting":
      "Release Ready=False/ApplierNamespaceNotAllowed Configured=False/ApplierNamespaceNotAllowed Configured=False/HeldByAnotherClaim Ready=False/HeldByAnotherClaim InControl=False/HeldByAnotherClaim",
    "Refused NotInLine":
      "Release Ready=False/ApplierNamespaceNotAllowed Configured=False/ApplierNamespaceNotAllowed InControl=False/NotConfigured",
  };
  for (const [pair, expected] of Object.entries(base)) {
    const [e, s] = pair.split(" ") as [Eligibility["state"], Standing["standing"]];
    const facts: ClaimFacts = {
      eligibility: eligibilities[e],
      standing: standings[s],
      deleting: false,
      hasFinalizer: false,
      gaveUp: false,
    };
    it(`${pair}: ${expected.split(" ")[0]}`, () => {
      expect(summary(facts)).toBe(expected);
    });
    it(`${pair}, with the finalizer: hands back when it let go for good or holds; a waiter only states it`, () => {
      const p = planClaim({ ...facts, hasFinalizer: true });
      const conclusive = e === "NotReferenced" || e === "Refused";
      if (s === "Holder" && !conclusive) expect(p.act).toBe(e === "Bound" ? "Check" : "Wait");
      else {
        expect(p).toMatchObject({ act: "Release", handBack: conclusive || s === "Holder" });
        // The finalizer's holder says nothing of holding nothing: its hand-back says what it left.
        if (p.act === "Release" && p.handBack)
          expect(p.conditions.filter((c) => c.reason === StatusReason.NotConfigured)).toEqual([]);
      }
    });
    it(`${pair}, deleting with the finalizer: hands back, never waits in line`, () => {
      const p = planClaim({ ...facts, deleting: true, hasFinalizer: true });
      expect(p).toMatchObject({ act: "Release", handBack: true });
      if (p.act === "Release")
        expect(p.conditions.filter((c) => c.reason === StatusReason.HeldByAnotherClaim)).toEqual([]);
    });
    it(`${pair}, after a given-up hand-back: InControl keeps saying where the applier was left`, () => {
      const p = planClaim({ ...facts, gaveUp: true });
      if (p.act === "Release")
        expect(p.conditions.map(said).filter((c) => c.startsWith("InControl=False/Not"))).toEqual([]);
    });
  }
  it("states every condition at the claim's generation", () => {
    const p = planClaim({
      eligibility: eligibilities.Refused,
      standing: standings.Waiting,
      generation: 7,
      deleting: false,
      hasFinalizer: false,
      gaveUp: false,
    });
    expect(p.act === "Release" && p.conditions.every((c) => c.observedGeneration === 7)).toBe(true);
  });
});

describe("planHold: after the kind's check of the applier", () => {
  const unknown: ExternalCheck = { configured: "Unknown", reason: "KustomizationNotFound", message: "gone" };
  const refused: ExternalCheck = { configured: false, reason: "SuspendOwnedElsewhere", message: "owned" };
  it("configured: holds, Configured=True naming every GitTarget", () => {
    expect(planHold({ configured: true }, ["team-a/web", "team-a/api"], false, 3)).toEqual({
      act: "Hold",
      conditions: [
        {
          type: "Configured",
          status: "True",
          reason: StatusReason.Bound,
          message: "GitTarget team-a/web, team-a/api applies through this claim",
          observedGeneration: 3,
        },
      ],
    });
  });
  it("not judgeable yet: Unknown, looked at again; a held applier is said to be left as it was", () => {
    const p = planHold(unknown, ["team-a/web"], true);
    expect(p).toMatchObject({ act: "Wait", requeueMs: UNDECIDED_REQUEUE_MS });
    expect(p.conditions.map(said)).toEqual([
      "Configured=Unknown/KustomizationNotFound",
      "Ready=Unknown/KustomizationNotFound",
      "InControl=Unknown/NotConfigured",
    ]);
    expect(p.conditions[2]!.message).toContain("left as this claim last held it");
  });
  it("refused by the applier's state: False, not looked at again until something changes", () => {
    const p = planHold(refused, ["team-a/web"], false);
    expect(p).toEqual({ act: "Wait", conditions: expect.any(Array) });
    expect(p.conditions.map(said)).toEqual([
      "Configured=False/SuspendOwnedElsewhere",
      "Ready=False/SuspendOwnedElsewhere",
      "InControl=False/NotConfigured",
    ]);
  });
});
