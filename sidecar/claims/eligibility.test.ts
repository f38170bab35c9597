import { describe, expect, it } from "vitest";
import {
  type ApplierSource,
  type EligibilityInput,
  eligibilityConditions,
  judgeEligibility,
  type ProviderView,
  type TargetView,
} from "./eligibility.js";

const claim = { kind: "FluxClaim" as const, namespace: "apps", name: "web" };
const provider: ProviderView = { namespace: "apps", name: "repo", url: "https://git.example/org/repo.git" };
const known: ApplierSource = { state: "Known", url: "https://git.example/org/repo", branch: "main" };

function target(over: Partial<TargetView> = {}): TargetView {
  return {
    uid: over.name ?? "t1",
    namespace: "apps",
    name: "t1",
    deleting: false,
    branch: "main",
    providerRef: { name: "repo" },
    claimRef: { kind: "FluxClaim", name: "web" },
    ...over,
  };
}

function input(targets: TargetView[], over: Partial<EligibilityInput> = {}): EligibilityInput {
  const providers = [provider, { ...provider, namespace: "shared", accessFrom: ["apps", "team"] }];
  return {
    claim,
    targets,
    provider: (ns, name) => providers.find((p) => p.namespace === ns && p.name === name),
    source: known,
    ...over,
  };
}

describe("eligibility", () => {
  it("a claim no GitTarget names is NotReferenced and Ready=True", () => {
    const e = judgeEligibility(input([target({ claimRef: { kind: "FluxClaim", name: "other" } })]));
    expect(e.state).toBe("NotReferenced");
    expect(eligibilityConditions(e)).toEqual([
      expect.objectContaining({ type: "Ready", status: "True", reason: "NotReferenced" }),
      expect.objectContaining({ type: "Configured", status: "Unknown", reason: "NotReferenced" }),
    ]);
  });

  it("a reference of another claim kind does not name the claim", () => {
    const e = judgeEligibility(input([target({ claimRef: { kind: "ArgoCDClaim", name: "web" } })]));
    expect(e.state).toBe("NotReferenced");
  });

  it("a GitTarget in the same namespace writing the source's repository and branch binds the claim", () => {
    const e = judgeEligibility(input([target()]));
    expect(e.state).toBe("Bound");
    expect(e.state === "Bound" && e.eligible.map((t) => t.name)).toEqual(["t1"]);
    expect(eligibilityConditions(e)).toEqual([]);
  });

  it("a GitTarget from another namespace needs the claim's accessFrom grant", () => {
    const other = target({
      namespace: "team",
      claimRef: { kind: "FluxClaim", name: "web", namespace: "apps" },
    });
    const refused = judgeEligibility(
      input([{ ...other, providerRef: { name: "repo", namespace: "shared" } }]),
    );
    expect(refused).toMatchObject({ state: "Refused", reason: "CrossNamespaceNotAllowed" });
    const grantedClaim = { ...claim, accessFrom: ["team"] };
    const bound = judgeEligibility(
      input([{ ...other, providerRef: { name: "repo", namespace: "shared" } }], { claim: grantedClaim }),
    );
    expect(bound.state).toBe("Bound");
    const wildcard = judgeEligibility(
      input([{ ...other, providerRef: { name: "repo", namespace: "shared" } }], {
        claim: { ...claim, accessFrom: ["*"] },
      }),
    );
    expect(wildcard.state).toBe("Bound");
  });

  it("a GitTarget being deleted is not eligible", () => {
    const e = judgeEligibility(input([target({ deleting: true })]));
    expect(e).toMatchObject({ state: "Refused", reason: "TargetDeleting" });
    expect(eligibilityConditions(e)).toEqual([
      expect.objectContaining({ type: "Ready", status: "False", reason: "TargetDeleting" }),
      expect.objectContaining({ type: "Configured", status: "False", reason: "TargetDeleting" }),
    ]);
  });

  it("a source on another repository or branch is SourceMismatch", () => {
    expect(judgeEligibility(input([target({ branch: "dev" })]))).toMatchObject({
      state: "Refused",
      reason: "SourceMismatch",
    });
    expect(
      judgeEligibility(
        input([target()], {
          source: { state: "Known", url: "https://git.example/org/other", branch: "main" },
        }),
      ),
    ).toMatchObject({ state: "Refused", reason: "SourceMismatch" });
  });

  it("repository URLs are compared in normalised form (.git, case of host, ssh)", () => {
    const e = judgeEligibility(
      input([target()], { source: { state: "Known", url: "git@GIT.example:org/repo.git", branch: "main" } }),
    );
    expect(e.state).toBe("Bound");
  });

  it("a GitProvider in another namespace must admit the GitTarget's namespace", () => {
    const t = target({ providerRef: { name: "repo", namespace: "shared" } });
    expect(judgeEligibility(input([t])).state).toBe("Bound");
    const t2 = target({
      namespace: "x",
      providerRef: { name: "repo", namespace: "shared" },
      claimRef: { kind: "FluxClaim", name: "web", namespace: "apps" },
    });
    expect(judgeEligibility(input([t2], { claim: { ...claim, accessFrom: ["x"] } }))).toMatchObject({
      state: "Refused",
      reason: "ProviderNotAdmitted",
    });
  });

  it("a GitTarget the worker refuses (its GitProvider's repository held by another, its folder another namespace's) binds nothing", () => {
    for (const reason of ["RepositoryHeld", "FolderHeld"]) {
      const e = judgeEligibility(input([target({ refused: { reason, message: "held by team-a" } })]));
      expect(e, reason).toMatchObject({ state: "Refused", reason });
      if (e.state === "Refused") expect(e.message).toContain("held by team-a");
    }
  });

  it("a missing GitProvider or an unknown source cannot be judged yet: Undecided, NotBound", () => {
    const e = judgeEligibility(input([target({ providerRef: { name: "missing" } })]));
    expect(e).toMatchObject({ state: "Undecided", reason: "NotBound" });
    expect(eligibilityConditions(e)[1]).toMatchObject({
      type: "Configured",
      status: "Unknown",
      reason: "NotBound",
    });
    const u = judgeEligibility(
      input([target()], { source: { state: "Unknown", message: "source not read yet" } }),
    );
    expect(u).toMatchObject({ state: "Undecided", message: "source not read yet" });
  });

  it("one eligible GitTarget binds the claim even when another naming it is refused", () => {
    const e = judgeEligibility(input([target({ name: "bad", branch: "dev" }), target({ name: "good" })]));
    expect(e.state).toBe("Bound");
    expect(e.state === "Bound" && e.eligible.map((t) => t.name)).toEqual(["good"]);
  });

  it("refusals with different reasons are reported as NotBound; a shared reason is kept", () => {
    const mixed = judgeEligibility(
      input([target({ name: "a", branch: "dev" }), target({ name: "b", deleting: true })]),
    );
    expect(mixed).toMatchObject({ state: "Refused", reason: "NotBound" });
    const same = judgeEligibility(
      input([target({ name: "a", branch: "dev" }), target({ name: "b", branch: "x" })]),
    );
    expect(same).toMatchObject({ state: "Refused", reason: "SourceMismatch" });
  });

  it("an unsupported source (e.g. multi-source Application) refuses with the kind's reason", () => {
    const e = judgeEligibility(
      input([target()], {
        source: { state: "Unsupported", reason: "UnsupportedSource", message: "multi-source" },
      }),
    );
    expect(e).toMatchObject({ state: "Refused", reason: "UnsupportedSource" });
  });
});
