/** The pure rules argosim copies from Argo CD 3.5: backoff, sync windows, operation patches. */
import { describe, expect, it } from "vitest";
import { asWrittenByArgo, newOperationState, operationStatePatch, retryGate } from "./operation.js";
import { kitchen, nextRetryAt, parseDuration } from "./retry.js";
import type { Application } from "./types.js";
import { canSync, matchingWindows, tzOffset, windowActive } from "./windows.js";

const at = (iso: string) => Date.parse(iso);

describe("an operation as Argo CD's Go types write it back (measured on real Argo CD 3.5.3)", () => {
  it("leaves out false, zero and empty fields, keeps empty structs, and always writes initiatedBy and retry", () => {
    expect(
      asWrittenByArgo({ sync: { revision: "main", prune: false }, initiatedBy: { username: "u" } }),
    ).toEqual({
      sync: { revision: "main" },
      initiatedBy: { username: "u" },
      retry: {},
    });
    // An empty SyncOperation is a non-nil pointer: `sync: {}`, still a sync.
    expect(asWrittenByArgo({ sync: { prune: false, syncOptions: [] } })).toEqual({
      sync: {},
      initiatedBy: {},
      retry: {},
    });
    const info = [{ name: "applygate.dev/operation-token", value: "" }];
    expect(asWrittenByArgo({ sync: {}, info, retry: { limit: 0, backoff: { duration: "5s" } } })).toEqual({
      sync: {},
      info,
      initiatedBy: {},
      retry: { backoff: { duration: "5s" } },
    });
    expect(newOperationState({ sync: { prune: false } }, 0).operation).toEqual({
      sync: {},
      initiatedBy: {},
      retry: {},
    });
  });
});

describe("retry arithmetic (NextRetryAt)", () => {
  it("waits duration × factor^n capped at maxDuration, with 5s ×2 3m defaults and bare integers as seconds", () => {
    expect(parseDuration("1m30s")).toBe(90_000);
    expect(parseDuration("250ms")).toBe(250);
    expect(parseDuration("7")).toBe(7_000);
    expect(() => parseDuration("soon")).toThrow();
    expect([0, 1, 2, 6].map((n) => nextRetryAt(undefined, 0, n))).toEqual([5_000, 10_000, 20_000, 180_000]);
    expect(nextRetryAt({ backoff: { duration: "1s", factor: 3, maxDuration: "5s" } }, 100, 2)).toBe(5_100);
    expect(kitchen(at("2026-10-20T15:04:00Z"))).toBe("3:04PM");
    expect(kitchen(at("2026-10-20T00:07:00Z"))).toBe("12:07AM");
  });
});

describe("sync windows (Matches, active, CanSync)", () => {
  const app = {
    metadata: { name: "web", namespace: "argocd" },
    spec: { destination: { namespace: "apps" } },
  } as Application;

  it("is active from each firing for its duration, in UTC", () => {
    const w = { kind: "deny", schedule: "0 22 * * *", duration: "2h" };
    expect(windowActive(w, at("2026-10-20T22:30:00Z"))).toBe(true);
    expect(windowActive(w, at("2026-10-21T00:30:00Z"))).toBe(false);
    expect(windowActive(w, at("2026-10-20T21:59:00Z"))).toBe(false);
  });

  it("matches by application, namespace or cluster glob, and none when no list is set", () => {
    expect(matchingWindows([{ applications: ["w*"] }, { namespaces: ["other"] }, {}], app)).toHaveLength(1);
  });

  it("denies unless manual and every active deny allows manual; inactive allows block the same way", () => {
    const now = at("2026-10-20T10:00:30Z");
    const deny = { kind: "deny", schedule: "* * * * *", duration: "1h", manualSync: true };
    const denyStrict = { ...deny, manualSync: false };
    expect(canSync([deny], false, now)).toBe(false);
    expect(canSync([deny], true, now)).toBe(true);
    expect(canSync([deny, denyStrict], true, now)).toBe(false);
    const closedAllow = { kind: "allow", schedule: "0 3 * * *", duration: "1h" };
    expect(canSync([closedAllow], false, now)).toBe(false);
    expect(
      canSync([closedAllow, { kind: "allow", schedule: "0 10 * * *", duration: "1h" }], false, now),
    ).toBe(true);
    expect(canSync([], false, now)).toBe(true);
    expect(canSync([{ kind: "deny", schedule: "bad", duration: "1h" }], true, now)).toBe(false);
  });
});

describe("operation state patches (setOperationState, merge patch)", () => {
  it("a completed state clears operation and stamps finishedAt; a retry nulls the stored finishedAt", () => {
    const s = newOperationState({ sync: { revision: "a" }, retry: { limit: 1, refresh: true } }, 0);
    const done = operationStatePatch(undefined, { ...s, phase: "Succeeded" }, 1000) as any;
    expect(done.operation).toBeNull();
    expect(done.status.operationState.finishedAt).toBe("1970-01-01T00:00:01Z");
    const waiting = { ...s, phase: "Running" as const, finishedAt: "1970-01-01T00:00:01Z", retryCount: 1 };
    // The gate counts from finishedAt with the already incremented retryCount: 5s × 2^1.
    expect(retryGate(waiting, 1000)).toEqual({ wait: 10_000 });
    const started = retryGate(waiting, 11_000);
    if (!("retry" in started)) throw new Error("expected a retry");
    expect(started.retry.operation.sync?.revision).toBeUndefined();
    expect(started.retry.message).toBe("Retrying operation with latest revisions. Attempt #1");
    const patch = operationStatePatch(waiting, started.retry, 11_000) as any;
    expect(patch.status.operationState.finishedAt).toBeNull();
    expect(patch.operation).toBeUndefined();
  });
});

describe("sync window timeZone (scheduleOffsetByTimeZone)", () => {
  const at = (iso: string) => Date.parse(iso);
  it("reads the schedule on the zone's wall clock at the offset of the moment judged; an unknown zone is UTC", () => {
    const w = { kind: "deny", schedule: "0 10 * * *", duration: "1h", timeZone: "Europe/Berlin" };
    expect(tzOffset("Europe/Berlin", at("2026-12-01T09:30:00Z"))).toBe(3_600_000);
    expect(windowActive(w, at("2026-12-01T09:30:00Z"))).toBe(true); // 10:30 in Berlin
    expect(windowActive(w, at("2026-12-01T10:30:00Z"))).toBe(false);
    expect(windowActive(w, at("2026-07-01T08:30:00Z"))).toBe(true); // summer: UTC+2
    expect(windowActive({ ...w, timeZone: "America/New_York" }, at("2026-12-01T15:30:00Z"))).toBe(true);
    expect(windowActive({ ...w, timeZone: "Nowhere/Else" }, at("2026-12-01T10:30:00Z"))).toBe(true);
  });
});
