import { describe, expect, it } from "vitest";
import type { Attempt } from "../queue/contract.js";
import type { KObject } from "../queue/kube/index.js";
import { makeAttempt } from "../test/support/attempts.js";
import { judgeStanding, type StandingInput } from "./standing.js";

const attempt = makeAttempt({
  claim: { kind: "ArgoCDClaim", namespace: "team-a", name: "web" },
  applier: { kind: "argocd", namespace: "argocd", name: "web" },
  targets: [
    { uid: "u1", namespace: "team-a", name: "one", reason: "ForeignCommit" },
    { uid: "u2", namespace: "team-a", name: "two", reason: "Refusal" },
  ],
  sentAt: "2026-01-01T00:00:00Z",
});

const inControl = (status: string, reason = "AutomatedSyncOff", message = "") => ({
  conditions: [{ type: "InControl", status, reason, message, lastTransitionTime: "2026-01-01T00:00:00Z" }],
});
const claim = (status = inControl("True")): KObject => ({
  metadata: { name: "web", namespace: "team-a" },
  spec: { applicationRef: { name: "web", namespace: "argocd" } },
  status,
});
const target = (name: string, uid: string, spec: Record<string, unknown> = {}): KObject => ({
  metadata: { name, namespace: "team-a", uid },
  spec: { branch: "main", claimRef: { kind: "ArgoCDClaim", name: "web" }, onRefusal: "Reapply", ...spec },
});
const grant = { namespace: "argocd", spec: { from: [{ namespace: "team-a" }] } };

function input(over: Partial<StandingInput> = {}): StandingInput {
  return {
    attempt,
    claim: claim(),
    grants: [grant],
    targets: new Map([
      ["team-a/one", target("one", "u1")],
      ["team-a/two", target("two", "u2")],
    ]),
    ...over,
  };
}

describe("judgeStanding: the decision still holds at the write", () => {
  it("a GitTarget naming a GitProvider in another namespace stands only while that provider admits it", () => {
    const cross = (name: string, uid: string) =>
      target(name, uid, { providerRef: { name: "shared", namespace: "git" } });
    const targets = new Map([
      ["team-a/one", cross("one", "u1")],
      ["team-a/two", target("two", "u2")],
    ]);
    const provider = (namespaces?: string[]): KObject => ({
      metadata: { name: "shared", namespace: "git" },
      spec: namespaces ? { accessFrom: { namespaces } } : {},
    });
    const only = { ok: true, targets: [attempt.targets[1]] };
    // Gone, or not admitting team-a: the target does not stand; the other (same namespace) does.
    expect(judgeStanding(input({ targets }))).toEqual(only);
    expect(judgeStanding(input({ targets, providers: new Map([["git/shared", provider()]]) }))).toEqual(only);
    expect(
      judgeStanding(input({ targets, providers: new Map([["git/shared", provider(["team-b"])]]) })),
    ).toEqual(only);
    // Admitting team-a, by name or by "*": both stand.
    for (const ns of [["team-a"], ["*"]])
      expect(judgeStanding(input({ targets, providers: new Map([["git/shared", provider(ns)]]) }))).toEqual({
        ok: true,
        targets: attempt.targets,
      });
    // Nothing left standing is Dropped, as for every other target that fell.
    const alone = new Map([["team-a/one", cross("one", "u1")]]);
    expect(judgeStanding(input({ targets: alone }))).toMatchObject({
      ok: false,
      phase: "Dropped",
      reason: "NoTargetStands",
    });
  });

  it("holds with every target standing", () => {
    expect(judgeStanding(input())).toEqual({ ok: true, targets: attempt.targets });
  });

  it("keeps only the targets that still stand: same uid, this claim, this branch, not suspended, consenting", () => {
    const cases: Array<[string, KObject | undefined]> = [
      ["gone", undefined],
      ["recreated", target("one", "u1-new")],
      [
        "being deleted",
        {
          ...target("one", "u1"),
          metadata: { name: "one", namespace: "team-a", uid: "u1", deletionTimestamp: new Date() },
        },
      ],
      ["suspended", target("one", "u1", { suspend: true })],
      ["another branch", target("one", "u1", { branch: "release" })],
      ["another claim", target("one", "u1", { claimRef: { kind: "ArgoCDClaim", name: "other" } })],
    ];
    for (const [why, one] of cases) {
      const targets = new Map<string, KObject>([["team-a/two", target("two", "u2")]]);
      if (one) targets.set("team-a/one", one);
      expect(judgeStanding(input({ targets })), why).toEqual({ ok: true, targets: [attempt.targets[1]] });
    }
    // A Refusal needs consent still.
    const noConsent = new Map([
      ["team-a/one", target("one", "u1")],
      ["team-a/two", target("two", "u2", { onRefusal: "Ignore" })],
    ]);
    expect(judgeStanding(input({ targets: noConsent }))).toEqual({ ok: true, targets: [attempt.targets[0]] });
  });

  it("none left: Dropped, nothing started", () => {
    expect(judgeStanding(input({ targets: new Map() }))).toMatchObject({
      ok: false,
      phase: "Dropped",
      reason: "NoTargetStands",
    });
  });

  it("a claim waiting in line or not in control never starts anything", () => {
    expect(
      judgeStanding(
        input({ claim: claim(inControl("False", "HeldByAnotherClaim", "claim x/y holds the applier")) }),
      ),
    ).toMatchObject({ ok: false, phase: "RequestFailed", reason: "HeldByAnotherClaim" });
    expect(judgeStanding(input({ claim: claim(inControl("False", "Releasing")) }))).toMatchObject({
      ok: false,
      phase: "RequestFailed",
      reason: "NotInControl",
    });
    expect(judgeStanding(input({ claim: claim({ conditions: [] } as never) }))).toMatchObject({
      reason: "NotInControl",
    });
  });

  it("the grant withdrawn: Dropped ApplierNamespaceNotAllowed", () => {
    expect(judgeStanding(input({ grants: [] }))).toMatchObject({
      ok: false,
      phase: "Dropped",
      reason: "ApplierNamespaceNotAllowed",
    });
  });

  it("the claim gone, being deleted or holding another applier", () => {
    expect(judgeStanding(input({ claim: undefined }))).toMatchObject({ reason: "ClaimNotFound" });
    const other = claim();
    other.spec = { applicationRef: { name: "api", namespace: "argocd" } };
    expect(judgeStanding(input({ claim: other }))).toMatchObject({
      phase: "Rejected",
      reason: "ApplierMismatch",
    });
  });

  it("a GitTarget in another namespace than the claim stands only while the claim admits it", () => {
    const a = {
      ...attempt,
      targets: [{ uid: "u3", namespace: "team-b", name: "three", reason: "CatchUp" as const }],
    };
    const three: KObject = {
      metadata: { name: "three", namespace: "team-b", uid: "u3" },
      spec: { branch: "main", claimRef: { kind: "ArgoCDClaim", name: "web", namespace: "team-a" } },
    };
    const targets = new Map([["team-b/three", three]]);
    expect(judgeStanding(input({ attempt: a, targets }))).toMatchObject({
      ok: false,
      reason: "NoTargetStands",
    });
    const admitting = claim();
    admitting.spec = { ...(admitting.spec as object), accessFrom: { namespaces: ["team-b"] } };
    expect(judgeStanding(input({ attempt: a, targets, claim: admitting }))).toMatchObject({ ok: true });
  });
});

describe("judgeStanding for a WebhookClaim", () => {
  const webhookAttempt: Attempt = {
    ...attempt,
    claim: { kind: "WebhookClaim", namespace: "team-a", name: "deployer" },
    applier: { kind: "webhook", namespace: "team-a", name: "deployer" },
    targets: [{ uid: "u1", namespace: "team-a", name: "one", reason: "CatchUp" }],
  };
  const hook = (name = "deployer"): KObject => ({
    metadata: { name, namespace: "team-a" },
    spec: { url: "https://deploy.example/hook", secretRef: { name: "k" } },
    status: inControl("True", "EndpointReady"),
  });
  const naming = (claimName: string) =>
    new Map([["team-a/one", target("one", "u1", { claimRef: { kind: "WebhookClaim", name: claimName } })]]);

  it("stands while the claim is in control and a GitTarget names it (its applier is itself)", () => {
    const s = judgeStanding({
      attempt: webhookAttempt,
      claim: hook(),
      grants: [],
      targets: naming("deployer"),
    });
    expect(s.ok).toBe(true);
  });

  it("an attempt for another endpoint is an ApplierMismatch", () => {
    const s = judgeStanding({
      attempt: { ...webhookAttempt, applier: { ...webhookAttempt.applier, name: "other" } },
      claim: hook(),
      grants: [],
      targets: naming("deployer"),
    });
    expect(s).toMatchObject({ ok: false, reason: "ApplierMismatch" });
  });
});
