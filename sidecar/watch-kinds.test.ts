import { describe, expect, it } from "vitest";
import { DEFAULT_WATCHED_KINDS, parseWatchKinds } from "./watch-kinds.js";

describe("--watch-kinds", () => {
  it("never watches Secrets by default: a watch keeps every Secret of the cluster in memory", () => {
    expect(DEFAULT_WATCHED_KINDS.map((k) => k.kind)).not.toContain("Secret");
  });

  it("reads apiVersion/Kind items, or none", () => {
    expect(parseWatchKinds("v1/Secret, apps/v1/StatefulSet")).toEqual([
      { apiVersion: "v1", kind: "Secret" },
      { apiVersion: "apps/v1", kind: "StatefulSet" },
    ]);
    expect(parseWatchKinds("none")).toEqual([]);
    expect(() => parseWatchKinds("Secret")).toThrow(/apiVersion\/Kind/);
    expect(() => parseWatchKinds("v1/secret")).toThrow(/v1\/secret/);
  });
});
