import { describe, expect, it } from "vitest";
import type { AcceptedWrite } from "../contract.js";
import { type BranchState, type HeldWrite, newBranchState, underWay } from "./branch-state.js";

const spec = {
  key: "https://git.example/r.git@main",
  remote: { url: "https://git.example/r.git" },
  branch: "main",
  targets: [],
};
const held: HeldWrite = { write: { id: "w1" } as AcceptedWrite, entryId: "1-0", charge: 10 };

/** Each piece of state that makes a branch busy, set on a branch otherwise quiet. */
const busy: Array<[string, (s: BranchState) => void]> = [
  ["writes read and not settled", (s) => s.held.set("w1", held)],
  ["writes waiting for their judgement", (s) => s.judging.set("w1", { ...held, stage: "snapshot" })],
  ["writes of suspended GitTargets", (s) => s.frozen.set("ns/t", [held])],
  [
    "open commit windows",
    (s) =>
      s.windows.set("ns/t", {
        target: "ns/t",
        writes: [held],
        openedAt: 0,
        lastAt: 0,
        settings: { idleMs: 1, maxMs: 1 },
      }),
  ],
  ["pending writes", (s) => s.pending.push({ seq: 1, target: "ns/t", writes: [held], closedAt: 0 })],
  ["entries waiting for their save", (s) => s.ledger.awaitingSave.set("1-0", 0)],
  ["a flush asked", (s) => s.flushes.push(() => {})],
  ["a publication cycle", (s) => (s.cycleSignal = new AbortController().signal)],
  ["a publication retry", (s) => (s.retry = { since: 0, failures: 1, nextAt: 10, lastCause: "down" })],
  ["a read of the remote asked", (s) => (s.observeAsked = "notice")],
];

describe("what a branch worker has under way", () => {
  it("is the first read of the remote until it is done, then nothing", () => {
    const s = newBranchState(spec);
    expect(underWay(s)).toEqual(["the first read of the remote"]);
    s.baselined = true;
    expect(underWay(s)).toEqual([]);
  });

  it.each(busy)("names %s, and only that", (what, make) => {
    const s = newBranchState(spec);
    s.baselined = true;
    make(s);
    expect(underWay(s)).toEqual([what]);
  });
});
