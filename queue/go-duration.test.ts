import { describe, expect, it } from "vitest";
import { parseDuration as simulatorsCopy } from "../test/cluster/duration.js";
import { parseGoDuration } from "./go-duration.js";

describe("parseGoDuration: Go's time.ParseDuration", () => {
  it("reads the units and their sums, as Flux and Argo CD specs write them", () => {
    expect(parseGoDuration("5s")).toBe(5_000);
    expect(parseGoDuration("3m")).toBe(180_000);
    expect(parseGoDuration("1m30s")).toBe(90_000);
    expect(parseGoDuration("250ms")).toBe(250);
    expect(parseGoDuration("1.5h")).toBe(5_400_000);
    expect(parseGoDuration("2h45m")).toBe(9_900_000);
    expect(parseGoDuration("0")).toBe(0);
    expect(parseGoDuration("-2s")).toBe(-2_000);
  });

  it("refuses what Go refuses, and a bare number unless asked to read it as seconds", () => {
    for (const bad of ["", " ", " 5s", "5", "s", "5x", "5s ", "5 s", "1m30", "abc", "1d"])
      expect(parseGoDuration(bad), JSON.stringify(bad)).toBeUndefined();
    expect(parseGoDuration("5", { bareSeconds: true })).toBe(5_000);
    expect(parseGoDuration("5s", { bareSeconds: true })).toBe(5_000);
  });

  it("agrees with the simulators' own copy on every duration they read", () => {
    for (const d of ["5s", "10m", "1m30s", "500ms", "1h", "2.5s", "90s", "3m0s"])
      expect(parseGoDuration(d), d).toBe(simulatorsCopy(d));
  });
});
