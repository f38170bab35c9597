import { describe, expect, it } from "vitest";
import { providerStatus, statusDiffers } from "./provider-status.js";

const base = { namespace: "team-a", webhookSecretName: "hook", generation: 3 };
const t0 = new Date("2026-01-01T00:00:00Z");
const t1 = new Date("2026-01-01T00:05:00Z");

describe("GitProvider status", () => {
  it("is Ready with the path once the webhook Secret gives a token, and says why not otherwise", () => {
    const ready = providerStatus(
      { ...base, hookPath: "/hook/abc", secret: { ok: true, resourceVersion: "1" } },
      [],
      t0,
    );
    expect(ready).toEqual({
      conditions: [
        {
          type: "Ready",
          status: "True",
          reason: "WebhookReady",
          message: "pushes are received at /hook/abc",
          lastTransitionTime: t0.toISOString(),
          observedGeneration: 3,
        },
        {
          type: "Accepted",
          status: "True",
          reason: "Accepted",
          message: "no other GitProvider holds its repository",
          lastTransitionTime: t0.toISOString(),
          observedGeneration: 3,
        },
      ],
      webhookPath: "/hook/abc",
      observedGeneration: 3,
    });
    const reason = (secret?: Parameters<typeof providerStatus>[0]["secret"]) => {
      const s = providerStatus({ ...base, ...(secret ? { secret } : {}) }, [], t0);
      expect(s.webhookPath).toBeNull();
      return `${s.conditions[0]!.status} ${s.conditions[0]!.reason}`;
    };
    expect(reason()).toBe("Unknown SecretPending");
    expect(reason({ ok: true, resourceVersion: "1" })).toBe("False SecretKeyMissing");
    expect(reason({ ok: false, status: 403 })).toBe("False SecretForbidden");
    expect(reason({ ok: false, status: 404 })).toBe("False SecretNotFound");
    expect(reason({ ok: false, status: 503 })).toBe("Unknown SecretUnreadable");
  });

  it("is Accepted=False and Ready=False while another GitProvider holds its repository", () => {
    const refused = { reason: "RepositoryHeld", message: "repository r is held by GitProvider team-b/r" };
    const s = providerStatus(
      { ...base, hookPath: "/hook/abc", secret: { ok: true, resourceVersion: "1" }, refused },
      [],
      t0,
    );
    expect(s.conditions.map((c) => [c.type, c.status, c.reason, c.message])).toEqual([
      ["Ready", "False", "RepositoryHeld", refused.message],
      ["Accepted", "False", "RepositoryHeld", refused.message],
    ]);
    // Its webhook path stays: pushes are received, and concern no branch of it.
    expect(s.webhookPath).toBe("/hook/abc");
    const released = providerStatus({ ...base, hookPath: "/hook/abc" }, s.conditions, t1);
    expect(released.conditions.map((c) => [c.type, c.status, c.lastTransitionTime])).toEqual([
      ["Ready", "True", t1.toISOString()],
      ["Accepted", "True", t1.toISOString()],
    ]);
    expect(statusDiffers({ ...s }, released)).toBe(true);
  });

  it("keeps lastTransitionTime while the status stays, and writes only what changed", () => {
    const first = providerStatus({ ...base, hookPath: "/hook/abc" }, [], t0);
    const again = providerStatus({ ...base, hookPath: "/hook/abc" }, first.conditions, t1);
    expect(again).toEqual(first);
    expect(statusDiffers({ ...first }, again)).toBe(false);
    const rotated = providerStatus({ ...base, hookPath: "/hook/def" }, first.conditions, t1);
    expect(rotated.conditions[0]!.lastTransitionTime).toBe(t0.toISOString());
    expect(statusDiffers({ ...first }, rotated)).toBe(true);
    const lost = providerStatus({ ...base, secret: { ok: false, status: 404 } }, first.conditions, t1);
    expect(lost.conditions[0]!.lastTransitionTime).toBe(t1.toISOString());
    expect(statusDiffers(undefined, lost)).toBe(true);
  });
});
