import { describe, expect, it } from "vitest";
import type { KObject } from "../../queue/kube/index.js";
import {
  artifactHolds,
  commitOfRevision,
  markOf,
  readOutcome,
  reconcileRanSince,
  tokenHandled,
} from "./outcome.js";

const A = "a".repeat(40);
const B = "b".repeat(40);
const C = "c".repeat(40);

function ks(opts: {
  requestedAt?: string;
  handled?: string;
  ready?: Record<string, unknown>;
  applied?: string;
  history?: Record<string, unknown>[];
}): KObject & { status: Record<string, unknown> } {
  return {
    metadata: {
      name: "app",
      namespace: "apps",
      ...(opts.requestedAt ? { annotations: { "reconcile.fluxcd.io/requestedAt": opts.requestedAt } } : {}),
    },
    status: {
      ...(opts.handled ? { lastHandledReconcileAt: opts.handled } : {}),
      ...(opts.applied ? { lastAppliedRevision: opts.applied } : {}),
      conditions: opts.ready
        ? [
            {
              type: "Ready",
              status: "True",
              lastTransitionTime: "2026-01-01T00:00:00Z",
              ...opts.ready,
            },
          ]
        : [],
      ...(opts.history ? { history: opts.history } : {}),
    },
  };
}

const before = ks({
  requestedAt: "T0",
  handled: "T0",
  ready: { status: "True", reason: "ReconciliationSucceeded", message: `Applied revision: main@sha1:${A}` },
  applied: `main@sha1:${A}`,
  history: [{ digest: "sha256:1", lastReconciledStatus: "ReconciliationSucceeded", totalReconciliations: 1 }],
});
const mark = markOf(before);

describe("revisions", () => {
  it("reads the commit of every revision form Flux writes", () => {
    expect(commitOfRevision(`main@sha1:${A}`)).toBe(A);
    expect(commitOfRevision(`feature/x@sha1:${A}`)).toBe(A);
    expect(commitOfRevision(`refs/heads/main@sha1:${A}`)).toBe(A);
    expect(commitOfRevision(`sha1:${A}`)).toBe(A);
    expect(commitOfRevision(`main/${A}`)).toBe(A);
    expect(commitOfRevision("main@sha1:abc")).toBeUndefined();
    expect(commitOfRevision(undefined)).toBeUndefined();
  });
  it("an artifact holds a commit only by its revision", () => {
    expect(
      artifactHolds({ metadata: { name: "s" }, status: { artifact: { revision: `main@sha1:${A}` } } }, A),
    ).toBe(true);
    expect(
      artifactHolds({ metadata: { name: "s" }, status: { artifact: { revision: `main@sha1:${B}` } } }, A),
    ).toBe(false);
    expect(artifactHolds({ metadata: { name: "s" } }, A)).toBe(false);
  });
});

describe("tokenHandled", () => {
  it("is handled when copied to lastHandledReconcileAt", () => {
    expect(tokenHandled(ks({ requestedAt: "T1", handled: "T1" }), "T1")).toBe(true);
    expect(tokenHandled(ks({ requestedAt: "T1", handled: "T0" }), "T1")).toBe(false);
  });
  it("a token stamped over ours and handled stands in for it", () => {
    expect(tokenHandled(ks({ requestedAt: "X", handled: "X" }), "T1")).toBe(true);
    expect(tokenHandled(ks({ requestedAt: "X", handled: "T0" }), "T1")).toBe(false);
  });
});

describe("reconcileRanSince", () => {
  it("a suspended return that only handles the token moves nothing", () => {
    expect(
      reconcileRanSince({ ...before, status: { ...before.status, lastHandledReconcileAt: "T1" } }, { mark }),
    ).toBe(false);
  });
  it("a new history count is proof, even within the same second", () => {
    const after = ks({
      ready: {
        status: "True",
        reason: "ReconciliationSucceeded",
        message: `Applied revision: main@sha1:${A}`,
      },
      history: [
        { digest: "sha256:1", lastReconciledStatus: "ReconciliationSucceeded", totalReconciliations: 2 },
      ],
    });
    expect(reconcileRanSince(after, { mark })).toBe(true);
  });
  it("a Ready that moved is proof", () => {
    const after = {
      ...before,
      status: {
        ...before.status,
        conditions: [
          {
            type: "Ready",
            status: "False",
            reason: "BuildFailed",
            lastTransitionTime: "2026-01-01T00:00:00Z",
          },
        ],
      },
    };
    expect(reconcileRanSince(after, { mark })).toBe(true);
  });
  it("without a mark, a transition or a history entry at or after the time counts (whole seconds)", () => {
    const k = ks({ ready: { lastTransitionTime: "2026-01-01T00:00:05Z" } });
    expect(reconcileRanSince(k, { at: "2026-01-01T00:00:05.700Z" })).toBe(true);
    expect(reconcileRanSince(k, { at: "2026-01-01T00:00:06.100Z" })).toBe(false);
    const h = ks({
      ready: { lastTransitionTime: "2026-01-01T00:00:00Z" },
      history: [{ lastReconciled: "2026-01-01T00:00:09Z" }],
    });
    expect(reconcileRanSince(h, { at: "2026-01-01T00:00:08Z" })).toBe(true);
  });
});

describe("fields a tenant or a skewed controller wrote ill-typed", () => {
  it("read as absent: a Ready status that is no condition status gives no outcome of it", () => {
    const k = ks({
      requestedAt: "T1",
      handled: "T1",
      ready: { status: true, reason: 5 },
      applied: `main@sha1:${B}`,
    });
    expect(markOf(k).ready).toEqual({ lastTransitionTime: "2026-01-01T00:00:00Z" });
    expect(
      readOutcome(k, { resumeToken: "T1", commit: B, since: { at: "2026-01-01T00:00:00Z" } }),
    ).toMatchObject({
      state: "Failed",
      reason: "NotReady",
    });
  });
  it("a lastHandledReconcileAt that is no string handles no token", () => {
    const k = ks({ requestedAt: "T1" });
    expect(tokenHandled({ ...k, status: { lastHandledReconcileAt: 1 } }, "T1")).toBe(false);
    expect(tokenHandled({ ...k, status: "T1" }, "T1")).toBe(false);
  });
});

describe("readOutcome: the outcome table", () => {
  const handled = (over: Parameters<typeof ks>[0]) => ks({ requestedAt: "T1", handled: "T1", ...over });
  const ran = [
    { digest: "sha256:2", lastReconciledStatus: "ReconciliationSucceeded", totalReconciliations: 1 },
  ];

  it("T1 not handled: pending", () => {
    expect(
      readOutcome(ks({ requestedAt: "T1", handled: "T0" }), {
        resumeToken: "T1",
        commit: B,
        since: { mark },
      }),
    ).toEqual({ state: "Pending" });
  });
  it("no reconcile ran since the resume: Failed, so the worker asks again", () => {
    const k = {
      ...before,
      metadata: { ...before.metadata, annotations: { "reconcile.fluxcd.io/requestedAt": "T1" } },
      status: { ...before.status, lastHandledReconcileAt: "T1" },
    };
    expect(readOutcome(k, { resumeToken: "T1", commit: B, since: { mark } })).toMatchObject({
      state: "Failed",
      reason: "NotReconciled",
    });
  });
  it("Ready=True and the commit applied: Succeeded", () => {
    const k = handled({ ready: { status: "True" }, applied: `main@sha1:${B}`, history: ran });
    expect(readOutcome(k, { resumeToken: "T1", commit: B, since: { mark } })).toMatchObject({
      state: "Succeeded",
      revisionMismatch: false,
    });
  });
  it("Ready=True at the revision the source holds now, not the commit: Succeeded with a mismatch", () => {
    const k = handled({ ready: { status: "True" }, applied: `main@sha1:${C}`, history: ran });
    expect(
      readOutcome(k, { resumeToken: "T1", commit: B, since: { mark }, sourceRevision: `main@sha1:${C}` }),
    ).toMatchObject({
      state: "Succeeded",
      revisionMismatch: true,
    });
  });
  it("Ready=True at any other revision (a lagging cached source): Failed", () => {
    const k = handled({ ready: { status: "True" }, applied: `main@sha1:${A}`, history: ran });
    expect(
      readOutcome(k, { resumeToken: "T1", commit: B, since: { mark }, sourceRevision: `main@sha1:${B}` }),
    ).toMatchObject({
      state: "Failed",
      reason: "RevisionNotApplied",
    });
  });
  it("Ready=False, DependencyNotReady: Failed with its own reason", () => {
    const k = handled({
      ready: { status: "False", reason: "DependencyNotReady", message: "dependency 'apps/db' is not ready" },
    });
    expect(readOutcome(k, { resumeToken: "T1", commit: B, since: { mark } })).toEqual({
      state: "Failed",
      reason: "DependencyNotReady",
      message: "dependency 'apps/db' is not ready",
    });
  });
  it("Ready=False for anything else: Failed with Flux's reason", () => {
    const k = handled({
      ready: { status: "False", reason: "HealthCheckFailed", message: "timeout" },
      history: ran,
    });
    expect(readOutcome(k, { resumeToken: "T1", commit: B, since: { mark } })).toMatchObject({
      state: "Failed",
      reason: "HealthCheckFailed",
    });
  });
  it("Ready=Unknown: pending, a reconcile runs now and its end is the outcome (it handles T1 again)", () => {
    // The resumed Kustomization reconciles on its interval; a follower that missed the end of the
    // reconcile that first handled T1 (a sidecar restarted meanwhile) reads the next one running.
    const running = handled({
      ready: {
        status: "Unknown",
        reason: "Progressing",
        message: "reconciliation in progress",
        lastTransitionTime: "2026-01-01T00:00:07Z",
      },
      applied: `main@sha1:${B}`,
      history: ran,
    });
    expect(readOutcome(running, { resumeToken: "T1", commit: B, since: { mark } })).toEqual({
      state: "Pending",
    });
    expect(
      readOutcome(running, { resumeToken: "T1", commit: B, since: { at: "2026-01-01T00:00:03Z" } }),
    ).toEqual({ state: "Pending" });
  });
  it("no Ready at all: Failed", () => {
    const k = handled({ history: ran });
    expect(readOutcome(k, { resumeToken: "T1", commit: B, since: { mark } })).toMatchObject({
      state: "Failed",
      reason: "NotReady",
    });
  });
});
