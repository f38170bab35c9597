import { describe, expect, it } from "vitest";
import { normalizeRepoUrl, remembered } from "./contract.js";
import { repositoryOf } from "./tenancy.js";

describe("remembered", () => {
  it("answers a known argument without calling again, and keeps at most max answers", () => {
    const calls: string[] = [];
    const f = remembered((s: string) => {
      calls.push(s);
      return s.length === 0 ? undefined : s.toUpperCase();
    }, 2);
    expect([f("a"), f("a"), f(""), f("")]).toEqual(["A", "A", undefined, undefined]);
    expect(calls).toEqual(["a", ""]);
    f("b"); // full: everything is forgotten, then b kept
    f("a");
    expect(calls).toEqual(["a", "", "b", "a"]);
  });

  it("remembers no call that threw", () => {
    let n = 0;
    const f = remembered((s: string) => {
      n++;
      if (s === "bad") throw new Error("no");
      return s;
    });
    expect(() => f("bad")).toThrow("no");
    expect(() => f("bad")).toThrow("no");
    expect(n).toBe(2);
  });

  it("the repository URL readers give the same answers the second time", () => {
    for (const url of ["https://Git.Example/Team/Apps.git/", "git@git.example:team/apps", "not a url//"]) {
      expect(repositoryOf(url)).toBe(repositoryOf(url));
    }
    expect(normalizeRepoUrl("https://Git.Example:443/team/apps.git")).toBe("git.example/team/apps");
    expect(normalizeRepoUrl("https://Git.Example:443/team/apps.git")).toBe("git.example/team/apps");
    expect(() => normalizeRepoUrl("https://[bad")).toThrow();
    expect(() => normalizeRepoUrl("https://[bad")).toThrow();
  });
});
