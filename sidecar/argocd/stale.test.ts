import { describe, expect, it } from "vitest";
import type { KObject } from "../../queue/kube/index.js";
import type { ArgoOperation } from "./application.js";

type OperationState = Record<string, unknown>;

import { type AncestryAnswer, decideStale } from "./stale.js";
import { buildSyncOperation } from "./sync.js";

const OLD = "1".repeat(40);
const NEW = "2".repeat(40);
const NEWER = "3".repeat(40);

function app(op: ArgoOperation | undefined, state: OperationState | undefined): KObject {
  return {
    metadata: { name: "web", namespace: "argocd", resourceVersion: "42" },
    spec: { source: { repoURL: "r", targetRevision: "main" } },
    ...(op ? { operation: op } : {}),
    status: state ? { operationState: state } : {},
  };
}

const ours = (revision: string | undefined, token = "old") => {
  const op = buildSyncOperation(app(undefined, undefined), { commit: revision ?? "", token });
  if (revision === undefined) delete op.sync!.revision;
  return op;
};
const running = (op: ArgoOperation, extra: Partial<OperationState> = {}): OperationState => ({
  operation: structuredClone(op),
  phase: "Running",
  startedAt: "2026-01-01T00:00:00Z",
  ...extra,
});

/** Decides as the executor does: ask the clone only when the decision asks for proof. */
function decide(a: KObject, commit: string, graph: Record<string, AncestryAnswer>) {
  const first = decideStale(a, commit);
  if (first.action !== "prove") return first;
  return decideStale(a, commit, graph[first.revision] ?? "unknown");
}

const graph: Record<string, AncestryAnswer> = {
  [OLD]: "ancestor",
  [NEWER]: "not-ancestor",
  "1111111": "ancestor",
};

describe("seed 002: terminate only a proven-stale operation", () => {
  it("terminates our running operation for a proven ancestor, at the version read", () => {
    const op = ours(OLD);
    expect(decide(app(op, running(op)), NEW, graph)).toEqual({
      action: "terminate",
      revision: OLD,
      token: "old",
      resourceVersion: "42",
    });
  });

  it("terminates a pending retry of it too (Running with a finishedAt)", () => {
    const op = ours(OLD);
    const s = running(op, { finishedAt: "2026-01-01T00:00:05Z", retryCount: 1 });
    expect(decide(app(op, s), NEW, graph).action).toBe("terminate");
  });

  it("falls back to the resolved revision when the pinned one is absent", () => {
    const op = ours(undefined);
    const s = running(op, { syncResult: { revision: OLD } });
    expect(decide(app(op, s), NEW, graph)).toMatchObject({ action: "terminate", revision: OLD });
  });

  it("proves an abbreviated commit id through the clone", () => {
    const op = ours("1111111");
    expect(decide(app(op, running(op)), NEW, graph)).toMatchObject({
      action: "terminate",
      revision: "1111111",
    });
  });

  const leave: [string, KObject, string][] = [
    ["released (the commit we must sync)", app(ours(NEW), running(ours(NEW))), "SameCommit"],
    ["released, abbreviated", app(ours(NEW.slice(0, 8)), running(ours(NEW.slice(0, 8)))), "SameCommit"],
    ["symbolic", app(ours("main"), running(ours("main"))), "Symbolic"],
    ["newer (a descendant)", app(ours(NEWER), running(ours(NEWER))), "NotAncestor"],
    ["unknown to the clone", app(ours("4".repeat(40)), running(ours("4".repeat(40)))), "Unknown"],
    [
      "already terminating",
      app(ours(OLD), { ...running(ours(OLD)), phase: "Terminating" }),
      "AlreadyTerminating",
    ],
    [
      "succeeded (operation not cleared yet)",
      app(ours(OLD), { ...running(ours(OLD)), phase: "Succeeded" }),
      "Completed",
    ],
    ["no revision", app(ours(undefined), running(ours(undefined))), "NoRevision"],
    [
      "foreign (somebody else's sync)",
      app(
        { sync: { revision: OLD }, initiatedBy: { username: "admin" } },
        running({ sync: { revision: OLD }, initiatedBy: { username: "admin" } }),
      ),
      "Foreign",
    ],
    [
      "foreign (Argo CD's own automated sync)",
      app(
        { sync: { revision: OLD }, initiatedBy: { automated: true } },
        running({ sync: { revision: OLD } }),
      ),
      "Foreign",
    ],
    [
      "not started (the state is an earlier operation's)",
      app(ours(OLD), running(ours(OLD, "earlier"))),
      "NotStarted",
    ],
    ["no operation set (a stuck state)", app(undefined, running(ours(OLD))), "NoOperation"],
  ];
  for (const [what, a, why] of leave) {
    it(`leaves ${what} alone`, () => {
      expect(decide(a, NEW, graph)).toEqual({ action: "leave", why });
    });
  }

  it("asks the clone nothing for what it can leave without proof", () => {
    expect(decideStale(app(ours("main"), running(ours("main"))), NEW).action).toBe("leave");
    expect(decideStale(app(ours(OLD), running(ours(OLD))), NEW)).toEqual({
      action: "prove",
      revision: OLD,
      token: "old",
    });
  });
});
