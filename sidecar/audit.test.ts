import { describe, expect, it } from "vitest";
import { HISTORY_LIMIT, type HistoryEntry } from "../queue/crds/index.js";
import { type KObject, type Kube, RESOURCES } from "../queue/kube/index.js";
import { COMMIT } from "../test/support/attempts.js";
import { fileWorld } from "../test/support/file-world.js";
import { startSidecarWorld } from "../test/support/sidecar-world.js";
import { historyEntry, startedBy, withHistory } from "./audit.js";
import {
  type ClaimLocator,
  completeOperation,
  recordOperation,
  updateOperation,
} from "./operation-record.js";

const FOREIGN = "f".repeat(40);
let kube: Kube;

fileWorld(async () => {
  const w = await startSidecarWorld({ namespaces: ["apps"] });
  kube = w.kube;
  await kube.apply(RESOURCES.fluxClaim, {
    apiVersion: "applygate.dev/v1alpha1",
    kind: "FluxClaim",
    metadata: { name: "prod", namespace: "apps" },
    spec: { kustomizationRef: { name: "web", namespace: "apps" } },
  });
  return w;
});

const claim: ClaimLocator = { type: RESOURCES.fluxClaim, namespace: "apps", name: "prod" };
const history = async () => {
  const c = await kube.get<KObject>(RESOURCES.fluxClaim, "apps", "prod");
  return (c?.status as { history?: HistoryEntry[] } | undefined)?.history ?? [];
};

describe("the audit of applies: status.history on the claim", () => {
  it("each ended operation is recorded with its commit, reasons, approvals, who started it, times, outcome and message; bounded, newest first", async () => {
    let t = Date.parse("2026-12-01T10:00:00Z");
    const now = () => new Date((t += 1000));
    for (let i = 1; i <= HISTORY_LIMIT + 2; i++) {
      const token = `t${i}`;
      await recordOperation(
        kube,
        claim,
        {
          token,
          commit: COMMIT,
          targets: [{ uid: "u1", reason: "ForeignCommit" }],
          approvals: [{ commit: FOREIGN, sources: ["Manual"], by: ["kubectl-annotate"] }],
          ...(i === 2 ? { override: { changeWindow: "INC-7", by: "kubectl-annotate" } } : {}),
        },
        { now },
      );
      await updateOperation(kube, claim, token, { phase: "Running", startedAt: now().toISOString() });
      await completeOperation(
        kube,
        claim,
        token,
        i % 2 === 0
          ? { phase: "Succeeded", outcome: "ReconciliationSucceeded", message: "applied" }
          : { phase: "Failed", outcome: "HealthCheckFailed", message: "web not ready" },
        { now },
      );
    }
    const h = await history();
    expect(h.map((e) => e.token)).toEqual(
      Array.from({ length: HISTORY_LIMIT }, (_, i) => `t${HISTORY_LIMIT + 2 - i}`),
    );
    expect(h[0]).toEqual({
      token: "t12",
      commit: COMMIT,
      reasons: ["ForeignCommit"],
      startedBy: "the branch worker",
      approvals: [{ commit: FOREIGN, sources: ["Manual"], by: ["kubectl-annotate"] }],
      requestedAt: expect.any(String),
      startedAt: expect.any(String),
      completedAt: expect.any(String),
      phase: "Succeeded",
      outcome: "ReconciliationSucceeded",
      message: "applied",
    });
    expect(h[1]).toMatchObject({
      token: "t11",
      phase: "Failed",
      outcome: "HealthCheckFailed",
      message: "web not ready",
    });
    // The override of t2 fell out of the bounded history; the operation recorded it while it was current.
    expect(h.some((e) => e.override)).toBe(false);
  });

  it("completing the same operation again adds nothing", async () => {
    const before = await history();
    await completeOperation(kube, claim, "t12", { phase: "Succeeded" });
    expect(await history()).toEqual(before);
  });
});

describe("history entries (pure)", () => {
  const op = {
    token: "t1",
    phase: "Succeeded" as const,
    commit: COMMIT,
    targets: [
      { uid: "u1", reason: "Repair" as const },
      { uid: "u2", reason: "Repair" as const },
    ],
    requestedAt: "2026-12-01T10:00:00Z",
  };
  it("who started it: the branch worker, a person's override, or an external resume", () => {
    expect(startedBy(op)).toBe("the branch worker");
    expect(startedBy({ ...op, override: { changeWindow: "INC-7", by: "kubectl-annotate" } })).toBe(
      "the branch worker, on the change-window override set by kubectl-annotate",
    );
    expect(startedBy({ ...op, token: "external-x" })).toMatch(/external resume/);
    expect(historyEntry(op).reasons).toEqual(["Repair"]);
  });
  it("an entry replaces the one with its token, and the list is cut at the limit", () => {
    const e = (token: string) => historyEntry({ ...op, token });
    expect(withHistory([e("a"), e("b")], e("a"), 2).map((x) => x.token)).toEqual(["a", "b"]);
    expect(withHistory([e("a"), e("b")], e("c"), 2).map((x) => x.token)).toEqual(["c", "a"]);
  });
});
