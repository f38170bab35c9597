import { describe, expect, it } from "vitest";
import { A, B, Driver, listed, report as phase, sends } from "../../test/support/decisions.js";
import type { DecisionState } from "../decide/index.js";
import type { KObject } from "../kube/index.js";
import { changeKey } from "./status.js";
import { age, redact, statusReport, whyText } from "./status-model.js";
import type { BranchView, ClusterView } from "./status-read.js";
import { render, tableRows } from "./status-render.js";

const NOW = Date.parse("2026-03-01T10:00:00Z");

/** A GitTarget as the API server returns it, for the decision core's `listed(uid, claim)`. */
function gitTarget(uid: string, claim: string, namespace = "apps"): KObject {
  return {
    apiVersion: "applygate.dev/v1alpha1",
    kind: "GitTarget",
    metadata: { name: `gt-${uid}`, namespace, uid },
    spec: {
      providerRef: { name: "repo" },
      branch: "main",
      path: `apps/${uid}`,
      claimRef: { kind: "FluxClaim", name: claim, namespace: "apps" },
    },
  };
}

function view(state: DecisionState, writes: Record<string, string[]> = {}): BranchView {
  return {
    key: state.branch.key,
    state,
    inbox: { entries: 3, byKind: { write: 2, report: 1 }, writesByTarget: writes, truncated: false },
    intake: { paused: false, retrying: false, chargedBytes: 2048 },
  };
}

const cluster = (targets: KObject[], scope: string[] | "all" = ["apps"]): ClusterView => ({
  scope,
  targets,
  claims: {},
});

describe("the status report", () => {
  it("says for each GitTarget what its applier waits for, from the decision core, and counts its writes", () => {
    const d = new Driver(NOW);
    d.settle([listed("u1", "app"), listed("u2", "other")], A);
    const sent = sends(d.publish(d.on({ type: "Observed", tip: B, pushedByUs: false }), B));
    const app = sent.find((x) => x.claim.name === "app");
    const other = sent.find((x) => x.claim.name === "other");
    d.on(phase(app?.token ?? "", "app", "Running", B));
    d.on(phase(other?.token ?? "", "other", "Failed", B));
    d.on({ type: "WriteDecided", entryId: "5-0", targetUid: "u1", createdObjects: [], editedObjects: [] });
    // Two writes of u1 are in the inbox: one decided (5-0), one after it, in the open window.
    const rep = statusReport(
      cluster([gitTarget("u1", "app"), gitTarget("u2", "other")]),
      { branches: [view(d.state, { "apps/gt-u1": ["5-0", "7-0"] })] },
      d.now,
    );
    const [u1, u2] = rep.targets;
    expect(u1).toMatchObject({
      name: "gt-u1",
      decisions: "read",
      state: "applying",
      pendingWrites: { decided: 1, inCommitWindow: 1 },
      queue: { depth: 3 },
    });
    expect(u1?.why).toBe(`operation ${app?.token} Running for bbbbbbbbbbbb (sent 0s ago)`);
    expect(u2).toMatchObject({ state: "held", pending: ["ForeignCommit"], reason: "ForeignCommit" });
    // As the claim's Retrying condition says it: the commit, the attempt that comes next, when.
    expect(u2?.why).toMatch(
      new RegExp(
        `^retrying bbbbbbb in 2 s \\(at ${new Date(d.now + 2_000).toISOString().replace(".000Z", "Z")}\\), attempt 2 \\(no limit`,
      ),
    );
    expect(u2?.retry).toMatchObject({ by: "worker", commit: B, attempt: 2, at: d.now + 2_000 });
  });

  it("a GitTarget the worker has not listed yet, and one naming no claim, say so", () => {
    const d = new Driver(NOW);
    d.settle([listed("u1", "app")], A);
    const lonely: KObject = { ...gitTarget("u9", "x"), spec: { branch: "main", path: "p" } };
    const rep = statusReport(cluster([gitTarget("u3", "new"), lonely]), { branches: [view(d.state)] }, NOW);
    expect(rep.targets.map((t) => [t.name, t.decisions, t.state])).toEqual([
      ["gt-u3", "not known to the worker yet", "unknown"],
      ["gt-u9", "not known to the worker yet", "unknown"],
    ]);
    expect(rep.targets[1]?.why).toBe("no claim named");
  });

  it("names of another namespace are left out: a reader sees only that another applier holds the source", () => {
    const d = new Driver(NOW);
    d.settle([listed("u1", "a", { sourceName: "repo" }), listed("u2", "b", { sourceName: "repo" })], A);
    const [att] = sends(d.publish(d.on({ type: "Observed", tip: B, pushedByUs: false }), B));
    const waitingKey = att?.claim.name === "a" ? "FluxClaim/apps/b" : "FluxClaim/apps/a";
    const e = d.state.appliers[waitingKey];
    expect(e).toBeDefined();
    const busy = {
      hold: "source busy" as const,
      by: `FluxClaim/apps/${att?.claim.name}`,
      token: att?.token ?? "",
    };
    expect(redact(busy, ["apps"])).toEqual(busy);
    expect(redact(busy, ["other"])).toEqual({ hold: "source busy", by: "(another namespace)", token: "" });
    expect(whyText(redact(busy, ["other"]), NOW)).toBe(
      "another applier of the same source is applying: (another namespace)",
    );
    const barrier = {
      hold: "barrier" as const,
      targets: [
        { uid: "u7", namespace: "team-b", name: "secret-name", folder: true, initialSnapshots: false },
      ],
    };
    expect(whyText(redact(barrier, ["apps"]), NOW)).toBe(
      "barrier: a GitTarget in another namespace: its folder is not in the tip",
    );
    expect(JSON.stringify(redact(barrier, ["apps"]))).not.toContain("secret-name");
    expect(JSON.stringify(redact({ hold: "suspended", targets: ["team-b/x", "apps/y"] }, ["apps"]))).toBe(
      JSON.stringify({ hold: "suspended", targets: ["(another namespace)", "apps/y"] }),
    );
  });

  it("without the decisions, what the claim records: an operation in flight, else the ApplyAllowed condition", () => {
    const claimObj = (status: Record<string, unknown>): KObject => ({
      metadata: { name: "app", namespace: "apps" },
      status,
    });
    const c = cluster([gitTarget("u1", "app")]);
    c.claims["FluxClaim/apps/app"] = {
      object: claimObj({
        operation: { token: "t-9", commit: B, phase: "Running", targets: [{ uid: "u1", reason: "Repair" }] },
        history: [
          {
            token: "t-8",
            commit: A,
            reasons: ["CatchUp"],
            phase: "Failed",
            outcome: "Failed",
            message: "boom",
            requestedAt: "2026-03-01T09:00:00Z",
          },
        ],
      }),
    };
    let rep = statusReport(c, { unread: "no Redis" }, NOW);
    expect(rep.targets[0]?.why).toBe("operation t-9 Running for bbbbbbbbbbbb (claim status)");
    expect(rep.targets[0]?.operations).toEqual([
      { token: "t-9", commit: B, reasons: ["Repair"], phase: "Running", current: true },
      {
        token: "t-8",
        commit: A,
        reasons: ["CatchUp"],
        phase: "Failed",
        requestedAt: "2026-03-01T09:00:00Z",
        ageSeconds: 3600,
        outcome: "Failed",
        message: "boom",
        current: false,
      },
    ]);
    c.claims["FluxClaim/apps/app"] = {
      object: claimObj({
        conditions: [
          { type: "ApplyAllowed", status: "False", reason: "OutsideChangeWindow", message: "closed" },
        ],
      }),
    };
    rep = statusReport(c, { unread: "no Redis" }, NOW);
    expect(rep.targets[0]?.why).toBe("OutsideChangeWindow: closed (claim status)");
    expect(rep.targets[0]?.decisions).toBe("not read: no Redis");
  });
});

describe("rendering", () => {
  const d = new Driver(NOW);
  d.settle([listed("u1", "app")], A);
  const rep = statusReport(
    cluster([gitTarget("u1", "app")], ["apps", "more"]),
    { branches: [view(d.state)] },
    NOW,
  );

  it("a table like flux get: NAMESPACE first when more than one namespace is shown", () => {
    const rows = tableRows(rep);
    expect(rows[0]).toEqual([
      "NAMESPACE",
      "NAME",
      "BRANCH",
      "PATH",
      "CLAIM",
      "WRITES",
      "PENDING",
      "STATE",
      "WHY",
    ]);
    expect(rows[1]).toEqual([
      "apps",
      "gt-u1",
      "main",
      "apps/u1",
      "FluxClaim/app",
      "0",
      "-",
      "idle",
      "nothing to apply",
    ]);
    expect(render(rep, "table", false).split("\n")[1]).toMatch(/^apps {3,}gt-u1 {3,}main/);
    expect(render({ ...rep, targets: [] }, "table", false)).toBe(
      "No GitTargets found in apps, more namespace.",
    );
  });

  it("a named GitTarget in blocks like argocd app get; json and yaml of the whole report", () => {
    const text = render(rep, "table", true);
    expect(text).toContain("GitTarget:        apps/gt-u1");
    expect(text).toContain("Why not now:      nothing to apply");
    expect(text).toContain("Branch queue:     3 inbox entries (2 write, 1 report)");
    expect(JSON.parse(render(rep, "json", false))).toEqual(JSON.parse(JSON.stringify(rep)));
    expect(render(rep, "yaml", true)).toMatch(/^namespace: apps\nname: gt-u1\n/);
  });

  it("a watch compares what the report says, not the ages that change at every read", () => {
    const t = rep.targets[0];
    if (!t) throw new Error("no row");
    const later = {
      ...t,
      why: "sent 9s ago",
      operations: t.operations.map((o) => ({ ...o, ageSeconds: 99 })),
    };
    expect(changeKey(later)).toBe(changeKey(t));
    expect(changeKey({ ...t, state: "held" })).not.toBe(changeKey(t));
  });

  it("ages as kubectl prints them", () => {
    expect([5, 119, 120, 7_199, 7_200, 172_799, 172_800].map(age)).toEqual([
      "5s",
      "119s",
      "2m",
      "119m",
      "2h",
      "47h",
      "2d",
    ]);
  });
});
