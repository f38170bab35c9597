import { createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { Attempt } from "../../queue/contract.js";
import { makeAttempt } from "../../test/support/attempts.js";
import { requestBody, signedRequest } from "./request.js";

const attempt = (reasons: Attempt["targets"][number]["reason"][]): Attempt =>
  makeAttempt({
    token: "op-1",
    claim: { kind: "WebhookClaim", namespace: "team-a", name: "deployer" },
    applier: { kind: "webhook", namespace: "team-a", name: "deployer" },
    branchKey: "git.example/org/repo@main",
    repository: "https://git.example/org/repo.git",
    targets: reasons.map((reason, i) => ({ uid: `u${i}`, namespace: "team-a", name: `t${i}`, reason })),
    sentAt: "2026-01-01T00:00:00Z",
  });

describe("requestBody", () => {
  it("names the attempt's first reason by precedence, CatchUp included", () => {
    expect(requestBody(attempt(["CatchUp"])).reason).toBe("CatchUp");
    expect(requestBody(attempt(["CatchUp", "Refusal"])).reason).toBe("Refusal");
    expect(requestBody(attempt(["Refusal", "Repair", "CatchUp"])).reason).toBe("Repair");
    expect(requestBody(attempt(["Repair", "ForeignCommit"])).reason).toBe("ForeignCommit");
  });

  it("holds exactly the fields a tool reads", () => {
    expect(Object.keys(requestBody(attempt(["CatchUp"]))).sort()).toEqual(
      ["branch", "claim", "commit", "reason", "repository", "token"].sort(),
    );
  });
});

describe("signedRequest", () => {
  it("signs the exact bytes sent, in the header of its style", () => {
    const body = requestBody(attempt(["ForeignCommit"]));
    for (const [style, headerName] of [
      ["generic-hmac", "x-signature"],
      ["github", "x-hub-signature-256"],
    ] as const) {
      const { bytes, headers } = signedRequest(body, { key: "k", style, deliveryId: "d-1" });
      expect(headers[headerName]).toBe(`sha256=${createHmac("sha256", "k").update(bytes).digest("hex")}`);
      expect(headers["x-applygate-delivery"]).toBe("d-1");
      expect(headers["x-applygate-token"]).toBe("op-1");
      expect(JSON.parse(bytes.toString())).toEqual(body);
    }
  });
});
