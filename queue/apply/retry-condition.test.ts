import { describe, expect, it } from "vitest";
import type { RetryView } from "../decide/index.js";
import { inWords, retryMessage, retryPatch } from "./retry-condition.js";

const NOW = Date.parse("2026-03-01T10:00:00Z");
const SHA = "3d4ae03c9b1f0e2a7d6c5b4a39281706f5e4d3c2";
const worker: RetryView = {
  by: "worker",
  commit: SHA,
  attempt: 3,
  at: NOW + 40_000,
  after: { phase: "Failed", commit: SHA, reason: "SyncError", message: "no matches for kind Widget" },
};
const argo: RetryView = {
  by: "applier",
  commit: SHA,
  attempt: 2,
  of: 6,
  at: NOW + 20_000,
  after: { phase: "Running", commit: SHA, message: "Retrying attempt #1 at 10:00AM." },
};
const claim = (conditions?: unknown[]) => ({
  apiVersion: "applygate.dev/v1alpha1",
  kind: "ArgoCDClaim",
  metadata: { name: "app", namespace: "apps", generation: 4 },
  ...(conditions ? { status: { conditions } } : {}),
});
const ready = { type: "Ready", status: "True", reason: "Held", message: "", lastTransitionTime: "t0" };

describe("the claim's Retrying condition", () => {
  it("names the commit, the attempt and when it comes, and how the last one ended", () => {
    expect(retryMessage(worker, NOW)).toBe(
      "retrying 3d4ae03 in 40 s (at 2026-03-01T10:00:40Z), attempt 3 (no limit: the wait doubles from 2 s to 5 min, and a new commit pushed to the branch is tried at once); the last attempt ended Failed (SyncError): no matches for kind Widget",
    );
    expect(retryMessage(argo, NOW)).toBe(
      "Argo CD retries 3d4ae03 in 20 s (at 2026-03-01T10:00:20Z), attempt 2 of 6 (Argo CD's sync retry); the last attempt said: Retrying attempt #1 at 10:00AM.",
    );
    const { of: _, ...unlimited } = argo;
    expect(retryMessage(unlimited, NOW)).toContain("attempt 2 (Argo CD's sync retry, no limit)");
  });

  it("says the wait in whole seconds, rounded up, and in minutes past one", () => {
    expect([0, 1, 999, 1000, 59_001, 60_000, 125_000, 300_000].map(inWords)).toEqual([
      "0 s",
      "1 s",
      "1 s",
      "1 s",
      "1 min",
      "1 min",
      "2 min 5 s",
      "5 min",
    ]);
  });

  it("is added beside the other conditions, True while it waits, and False once nothing is waited for", () => {
    const waiting = retryPatch(claim([ready]), worker, NOW);
    expect(waiting).toEqual({
      conditions: [
        ready,
        {
          type: "Retrying",
          status: "True",
          reason: "BackingOff",
          message: retryMessage(worker, NOW),
          lastTransitionTime: new Date(NOW).toISOString(),
          observedGeneration: 4,
        },
      ],
    });
    const shown = (waiting as { conditions: unknown[] }).conditions;
    // The same wait again, later: only the "in … s" moves, the transition time stays.
    const later = retryPatch(claim(shown), worker, NOW + 10_000) as { conditions: Record<string, string>[] };
    expect(later.conditions[1]?.lastTransitionTime).toBe(new Date(NOW).toISOString());
    expect(later.conditions[1]?.message).toMatch(/^retrying 3d4ae03 in 30 s/);
    const over = retryPatch(claim(shown), null, NOW + 40_000) as { conditions: Record<string, string>[] };
    expect(over.conditions[0]).toEqual(ready);
    expect(over.conditions[1]).toMatchObject({
      type: "Retrying",
      status: "False",
      reason: "NoRetryPending",
      lastTransitionTime: new Date(NOW + 40_000).toISOString(),
    });
    // Already shown as nothing waited for: no write.
    expect(retryPatch(claim(over.conditions), null, NOW + 50_000)).toBeUndefined();
    expect(retryPatch(claim(shown), worker, NOW)).toBeUndefined();
  });

  it("a claim that never waited gets no condition", () => {
    expect(retryPatch(claim([ready]), null, NOW)).toBeUndefined();
    expect(retryPatch(claim(), null, NOW)).toBeUndefined();
  });

  it("Argo CD's own retry has a reason of its own", () => {
    const p = retryPatch(claim(), argo, NOW) as { conditions: Record<string, string>[] };
    expect(p.conditions[0]).toMatchObject({ status: "True", reason: "ApplierRetrying" });
  });
});
