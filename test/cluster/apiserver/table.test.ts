import { describe, expect, it } from "vitest";
import { humanDuration } from "./table.js";

const s = 1000;
const m = 60 * s;
const h = 60 * m;
const d = 24 * h;
const y = 365 * d;

describe("humanDuration, as the server's printers write a time since", () => {
  it.each([
    [-2 * s, "<invalid>"],
    [-1 * s, "0s"],
    [0, "0s"],
    [119 * s, "119s"],
    [2 * m, "2m"],
    [9 * m + 59 * s, "9m59s"],
    [10 * m + 30 * s, "10m"],
    [179 * m, "179m"],
    [3 * h, "3h"],
    [7 * h + 59 * m, "7h59m"],
    [8 * h + 30 * m, "8h"],
    [47 * h, "47h"],
    [2 * d, "2d"],
    [7 * d + 23 * h, "7d23h"],
    [8 * d + 5 * h, "8d"],
    [702 * d, "702d"],
    [729 * d + 23 * h, "729d"],
    [730 * d, "2y"],
    [2 * y + 10 * d, "2y10d"],
    [7 * y + 364 * d, "7y364d"],
    [8 * y + 100 * d, "8y"],
  ])("%i ms is %s", (ms, text) => {
    expect(humanDuration(ms)).toBe(text);
  });
});
