import { describe, expect, it } from "vitest";
import { readForeign } from "./approval-walk.js";

/** A first-parent history: each commit's parent is the one before it. */
function history(...line: string[]) {
  const parents = new Map<string, string[]>();
  line.forEach((c, i) => {
    parents.set(c, i === 0 ? [] : [line[i - 1] as string]);
  });
  return async (oid: string) => parents.get(oid) ?? [];
}

describe("readForeign: the foreign commits an apply of the tip would bring", () => {
  it("from the tip back to the last applied commit, newest first", async () => {
    expect(await readForeign(history("a", "b", "c", "d"), "d", "b", [])).toEqual({
      tip: "d",
      since: "b",
      commits: ["d", "c"],
    });
  });
  it("leaves out the worker's own publications, also between foreign commits", async () => {
    // a (applied) ← f1 (foreign) ← o1 ← o2 (ours, base f1) ← f2 (foreign) ← o3 (ours, base f2)
    const read = history("a", "f1", "o1", "o2", "f2", "o3");
    const own = [
      { tip: "o2", base: "f1" },
      { tip: "o3", base: "f2" },
    ];
    expect((await readForeign(read, "o3", "a", own)).commits).toEqual(["f2", "f1"]);
    expect((await readForeign(read, "o2", "a", own)).commits).toEqual(["f1"]);
    expect((await readForeign(read, "o3", "f2", own)).commits).toEqual([]);
  });
  it("gives the line it walked, newest first, the worker's publication tips included (what a tag mode reads tags on)", async () => {
    const read = history("a", "f1", "o1", "o2", "f2", "o3");
    const own = [
      { tip: "o2", base: "f1" },
      { tip: "o3", base: "f2" },
    ];
    const line: string[] = [];
    await readForeign(read, "o3", "a", own, undefined, line);
    expect(line).toEqual(["o3", "f2", "o2", "f1"]);
  });
  it("without a last applied commit, only the newest foreign commit is asked for", async () => {
    const read = history("a", "b", "o");
    expect((await readForeign(read, "o", null, [{ tip: "o", base: "b" }])).commits).toEqual(["b"]);
  });
  it("a last applied commit off the line (a force push) counts everything up to the limit", async () => {
    expect((await readForeign(history("a", "b", "c"), "c", "x", [], 2)).commits).toEqual(["c", "b"]);
    expect((await readForeign(history("a", "b", "c"), "c", "x", [])).commits).toEqual(["c", "b", "a"]);
  });
});
