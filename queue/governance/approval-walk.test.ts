import { describe, expect, it } from "vitest";
import { descends, readForeign } from "./approval-walk.js";

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
  it("a tip that does not descend from the last applied commit names only its newest foreign commit", async () => {
    // A force-push back to b after d was applied: b's history was approved once, a return is not.
    const read = history("a", "b", "c", "d");
    expect(await readForeign(read, "b", "d", [])).toEqual({
      tip: "b",
      since: "d",
      commits: ["b"],
      notDescendant: true,
    });
    // The worker's own commits on top of the rollback: the commit it names is still b.
    const withOwn = async (oid: string) => (oid === "o" ? ["b"] : read(oid));
    const line: string[] = [];
    expect(await readForeign(withOwn, "o", "d", [{ tip: "o", base: "b" }], undefined, line)).toEqual({
      tip: "o",
      since: "d",
      commits: ["b"],
      notDescendant: true,
    });
    expect(line).toEqual(["o", "b"]);
    // Another history altogether (a rewritten branch) is no descendant either.
    expect((await readForeign(history("x", "y"), "y", "d", [])).notDescendant).toBe(true);
  });

  it("a last applied commit reached only through a merge's second parent is an ancestor: the line counts", async () => {
    // main: a ← m (merge of a and feature's f2); the applied commit f1 sits on feature: a ← f1 ← f2.
    const parents: Record<string, string[]> = { a: [], f1: ["a"], f2: ["f1"], m: ["a", "f2"], n: ["m"] };
    const read = async (oid: string) => parents[oid] ?? [];
    expect(await readForeign(read, "n", "f1", [])).toEqual({
      tip: "n",
      since: "f1",
      commits: ["n", "m", "a"],
    });
  });

  it("past the walk's limit, a descendant counts what the walk found", async () => {
    expect(await readForeign(history("a", "b", "c", "d"), "d", "a", [], 2)).toEqual({
      tip: "d",
      since: "a",
      commits: ["d", "c"],
    });
  });
});

describe("descends", () => {
  it("follows every parent, and gives up past its limit", async () => {
    const parents: Record<string, string[]> = { a: [], b: ["a"], c: ["a"], m: ["b", "c"] };
    const read = async (oid: string) => parents[oid] ?? [];
    expect(await descends(read, "m", "c")).toBe(true);
    expect(await descends(read, "m", "a")).toBe(true);
    expect(await descends(read, "m", "m")).toBe(true);
    expect(await descends(read, "b", "c")).toBe(false);
    expect(await descends(read, "m", "a", 2)).toBe(false);
  });
});
