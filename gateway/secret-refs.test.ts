import { describe, expect, it } from "vitest";
import { fixtureObjects, NS } from "../test/support/gateway.js";
import { dropsValue, namedSecrets, outcomeChanged } from "./secret-refs.js";

describe("named Secrets", () => {
  it("are the webhook and intake Secrets, each once, with who names them", () => {
    const { providers, targets } = fixtureObjects();
    const shared = { ...providers[0]!, metadata: { name: "github-2", namespace: NS } };
    const refs = namedSecrets([...providers, shared], targets);
    expect([...refs.keys()].sort()).toEqual(
      [
        "github-webhook",
        "gitea-webhook",
        "gitlab-webhook",
        "generic-webhook",
        "vector-webhook",
        "legacy-webhook",
        "nosecret-webhook",
        "infra-intake",
      ]
        .map((n) => `${NS}/${n}`)
        .sort(),
    );
    expect(refs.get(`${NS}/github-webhook`)!.usedBy).toEqual([
      `GitProvider ${NS}/github`,
      `GitProvider ${NS}/github-2`,
    ]);
    expect(refs.get(`${NS}/infra-intake`)!.usedBy).toEqual([`GitTarget ${NS}/infra`]);
  });

  it("log a read only when its outcome changes kind", () => {
    const ok = { ok: true as const, resourceVersion: "1" };
    const forbidden = { ok: false as const, status: 403 };
    expect(outcomeChanged(undefined, ok)).toBe(false);
    expect(outcomeChanged(undefined, forbidden)).toBe(true);
    expect(outcomeChanged(forbidden, { ok: false, status: 403 })).toBe(false);
    expect(outcomeChanged(forbidden, { ok: false, status: 404 })).toBe(true);
    expect(outcomeChanged(forbidden, ok)).toBe(true);
    expect(outcomeChanged(ok, { ok: true, resourceVersion: "2" })).toBe(false);
    expect([403, 404, 500, 0].map(dropsValue)).toEqual([true, true, false, false]);
  });
});
