import { describe, expect, it } from "vitest";
import type { KObject } from "../../queue/kube/index.js";
import { isAutomatedSyncEnabled, sourceOf, switchState, tokenOf } from "./application.js";
import { buildSyncOperation, busyWith, SYNC_WINDOW_MESSAGE, startSyncUpdate, syncProgress } from "./sync.js";

const C = "c".repeat(40);

function app(over: Partial<KObject> = {}, spec: Record<string, unknown> = {}): KObject {
  return {
    apiVersion: "argoproj.io/v1alpha1",
    kind: "Application",
    metadata: { name: "web", namespace: "argocd", resourceVersion: "7" },
    spec: {
      project: "default",
      source: { repoURL: "http://git/repo", path: "apps/web", targetRevision: "main" },
      destination: { server: "https://kubernetes.default.svc", namespace: "web" },
      ...spec,
    },
    ...over,
  };
}

describe("the switch as Argo CD reads it (IsAutomatedSyncEnabled)", () => {
  it("is on when automated is present and enabled is unset or true, off otherwise", () => {
    expect(isAutomatedSyncEnabled(undefined)).toBe(false);
    expect(isAutomatedSyncEnabled(null)).toBe(false);
    expect(isAutomatedSyncEnabled({})).toBe(true);
    expect(isAutomatedSyncEnabled({ prune: true })).toBe(true);
    expect(isAutomatedSyncEnabled({ enabled: true })).toBe(true);
    expect(isAutomatedSyncEnabled({ enabled: false, prune: true })).toBe(false);
    expect(switchState(undefined)).toBe("NoAutomated");
    expect(switchState({ prune: true })).toBe("AutomatedOn");
    expect(switchState({ enabled: false })).toBe("AutomatedOff");
  });
});

describe("the source", () => {
  it("is the repository and the branch the Application follows", () => {
    expect(sourceOf(app())).toEqual({ state: "Known", url: "http://git/repo", branch: "main" });
    expect(sourceOf(app({}, { source: { repoURL: "x", targetRevision: "refs/heads/dev" } }))).toMatchObject({
      branch: "dev",
    });
  });
  it("refuses multi-source, hydrator, HEAD, tags refs and commits as UnsupportedSource", () => {
    for (const spec of [
      { sources: [{ repoURL: "a" }, { repoURL: "b" }] },
      { sourceHydrator: { drySource: {} } },
      { source: { repoURL: "x", targetRevision: "HEAD" } },
      { source: { repoURL: "x" } },
      { source: { repoURL: "x", targetRevision: C } },
      { source: { repoURL: "x", targetRevision: "refs/tags/v1" } },
    ]) {
      expect(sourceOf(app({}, spec))).toMatchObject({
        state: "Unsupported",
        reason: "UnsupportedSource",
      });
    }
  });
});

describe("the operation a request builds (autoSync's, pinned)", () => {
  it("pins the revision, takes prune from automated, keeps syncOptions, and carries the token", () => {
    const a = app(
      {},
      {
        source: { repoURL: "http://git/repo", targetRevision: "main" },
        syncPolicy: {
          automated: { enabled: false, prune: true },
          syncOptions: ["ServerSideApply=true"],
          retry: { limit: 2, backoff: { duration: "1s" }, refresh: true },
        },
      },
    );
    const op = buildSyncOperation(a, { commit: C, token: "t1", reasons: ["ForeignCommit", "CatchUp"] });
    expect(op).toEqual({
      sync: {
        revision: C,
        prune: true,
        syncOptions: ["ServerSideApply=true"],
        source: { repoURL: "http://git/repo", targetRevision: "main" },
      },
      initiatedBy: { username: "applygate", automated: true },
      info: [
        { name: "applygate.dev/operation-token", value: "t1" },
        { name: "applygate.dev/reason", value: "ForeignCommit,CatchUp" },
      ],
      // refresh dropped: a retry must stay pinned to the commit
      retry: { limit: 2, backoff: { duration: "1s" } },
    });
    expect(a.spec).toMatchObject({ syncPolicy: { retry: { refresh: true } } });
    expect(tokenOf(op)).toBe("t1");
  });

  it("does not prune without an automated block and retries 5 times by default", () => {
    const op = buildSyncOperation(app(), { commit: C, token: "t" });
    expect(op.sync?.prune).toBe(false);
    expect(op.retry).toEqual({ limit: 5 });
  });

  it("leaves out what a tenant wrote ill-typed: a prune that is no boolean, options that are no strings", () => {
    const a = app(
      {},
      { syncPolicy: { automated: { prune: "true" }, syncOptions: ["Prune=false", 5], retry: "x" } },
    );
    const op = buildSyncOperation(a, { commit: C, token: "t" });
    expect(op.sync).toMatchObject({ prune: false, syncOptions: ["Prune=false"] });
    expect(op.retry).toEqual({ limit: 5 });
    expect(sourceOf(app({}, { source: { repoURL: "x", targetRevision: 7 } }))).toMatchObject({
      state: "Unsupported",
    });
  });

  it("starts by setting operation and clearing the operation state, at the version read", () => {
    const a = app({ status: { operationState: { phase: "Succeeded" }, sync: { status: "Synced" } } });
    const op = buildSyncOperation(a, { commit: C, token: "t" });
    const u = startSyncUpdate(a, op);
    expect(u.operation).toEqual(op);
    expect(u.status).toEqual({ sync: { status: "Synced" } });
    expect(u.metadata.resourceVersion).toBe("7");
    expect(a.status).toMatchObject({ operationState: { phase: "Succeeded" } });
  });
});

describe("whether another operation is in the way", () => {
  it("is busy only while operation is set", () => {
    expect(busyWith(app())).toEqual({ busy: false });
    const stuck = app({ status: { operationState: { phase: "Running", operation: {} } } });
    expect(busyWith(stuck).busy).toBe(false);
    const other = app({ operation: { sync: { revision: "main" }, initiatedBy: { username: "admin" } } });
    expect(busyWith(other)).toMatchObject({
      busy: true,
      message: expect.stringContaining("a sync by admin"),
    });
  });
});

describe("where our operation stands", () => {
  const op = buildSyncOperation(app(), { commit: C, token: "t" });
  const state = (phase: string, extra: Record<string, unknown> = {}) => ({
    operation: op,
    phase,
    startedAt: "2026-01-01T00:00:00Z",
    ...extra,
  });
  it("Absent when neither operation nor operation state carry the token", () => {
    expect(syncProgress(app(), "t").stage).toBe("Absent");
    const foreign = { ...op, info: [{ name: "applygate.dev/operation-token", value: "other" }] };
    expect(syncProgress(app({ operation: foreign }), "t").stage).toBe("Absent");
    // a token in info of an operation somebody else initiated is not ours
    const impostor = { ...op, initiatedBy: { username: "admin" } };
    expect(syncProgress(app({ operation: impostor }), "t").stage).toBe("Absent");
  });
  it("Pending when only operation carries it", () => {
    expect(syncProgress(app({ operation: op }), "t").stage).toBe("Pending");
  });
  it("Running while the state carrying it has not completed; a pending retry is still running", () => {
    expect(
      syncProgress(app({ operation: op, status: { operationState: state("Running") } }), "t"),
    ).toMatchObject({
      stage: "Running",
      retrying: false,
    });
    const retry = state("Running", { finishedAt: "2026-01-01T00:00:05Z", message: "x. Retrying attempt #1" });
    expect(syncProgress(app({ operation: op, status: { operationState: retry } }), "t")).toMatchObject({
      stage: "Running",
      retrying: true,
    });
    // completed in the state but operation not cleared yet: still finishing
    expect(
      syncProgress(app({ operation: op, status: { operationState: state("Succeeded") } }), "t").stage,
    ).toBe("Running");
  });
  it("reports a sync window's block as running", () => {
    const blocked = state("Running", { message: SYNC_WINDOW_MESSAGE });
    expect(syncProgress(app({ operation: op, status: { operationState: blocked } }), "t")).toMatchObject({
      stage: "Running",
      blockedByWindow: true,
      message: SYNC_WINDOW_MESSAGE,
    });
  });
  it("Completed once the state completed and operation is cleared", () => {
    for (const phase of ["Succeeded", "Failed", "Error"]) {
      const s = state(phase, { message: "m", syncResult: { revision: C } });
      expect(syncProgress(app({ status: { operationState: s } }), "t")).toEqual({
        stage: "Completed",
        phase,
        message: "m",
        revision: C,
      });
    }
  });
  it("Orphaned when operation was removed while the state runs", () => {
    expect(syncProgress(app({ status: { operationState: state("Running") } }), "t").stage).toBe("Orphaned");
  });
});
