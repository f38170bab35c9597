import { describe, expect, it } from "vitest";
import type { GitProvider, GitTarget } from "../crds/index.js";
import { SharedBranchIndex } from "./shared-branches.js";

const provider = (name: string, url: string) =>
  ({ metadata: { name, namespace: "team" }, spec: { url } }) as GitProvider;
const target = (name: string, providerName: string, branch = "main", namespace = "team") =>
  ({
    metadata: { name, namespace },
    spec: { providerRef: { name: providerName }, branch, path: name },
  }) as GitTarget;

/** A cache of GitProviders and GitTargets, counting the full listings the index makes. */
function world() {
  const providers = new Map<string, GitProvider>([
    ["a", provider("a", "https://git.example.com/org/apps.git")],
    // The same repository, spelled otherwise.
    ["b", provider("b", "git@git.example.com:org/apps")],
    ["c", provider("c", "https://git.example.com/org/other")],
  ]);
  const targets = new Map<string, GitTarget>();
  let listings = 0;
  const index = new SharedBranchIndex({
    targets: () => {
      listings++;
      return [...targets.values()];
    },
    target: (ns, name) => targets.get(`${ns}/${name}`),
    provider: (t) => providers.get(t.spec.providerRef.name),
  });
  const put = (t: GitTarget) => {
    const key = `${t.metadata.namespace}/${t.metadata.name}`;
    targets.set(key, t);
    index.changed(key, t);
  };
  const drop = (key: string) => {
    targets.delete(key);
    index.changed(key, undefined);
  };
  const names = (place: string) =>
    index
      .at(place)
      .map((t) => t.metadata.name)
      .sort();
  return { providers, index, put, drop, names, listings: () => listings };
}

describe("SharedBranchIndex", () => {
  const APPS_MAIN = "git.example.com/org/apps@main";

  it("groups GitTargets by repository branch, whichever GitProvider spells the repository", () => {
    const w = world();
    w.put(target("t1", "a"));
    w.put(target("t2", "b"));
    w.put(target("t3", "a", "dev"));
    w.put(target("t4", "c"));
    w.put(target("t5", "missing"));
    expect(w.names(APPS_MAIN)).toEqual(["t1", "t2"]);
    expect(w.names("git.example.com/org/apps@dev")).toEqual(["t3"]);
    expect(w.index.placeOfTarget(target("t5", "missing"))).toBeUndefined();
  });

  it("follows GitTargets changed and deleted after it was built, listing the cache once", () => {
    const w = world();
    w.put(target("t1", "a"));
    expect(w.names(APPS_MAIN)).toEqual(["t1"]);
    for (let i = 0; i < 100; i++) w.put(target(`n${i}`, "b", `b${i}`));
    w.put(target("t2", "b"));
    // t1 moves to another branch: it leaves the group.
    w.put(target("t1", "a", "dev"));
    expect(w.names(APPS_MAIN)).toEqual(["t2"]);
    w.drop("team/t2");
    expect(w.names(APPS_MAIN)).toEqual([]);
    expect(w.names("git.example.com/org/apps@b7")).toEqual(["n7"]);
    // One listing in all: each change found its group without reading every GitTarget.
    expect(w.listings()).toBe(1);
  });

  it("is built again after a GitProvider changed, which may move every GitTarget naming it", () => {
    const w = world();
    w.put(target("t1", "c"));
    expect(w.names(APPS_MAIN)).toEqual([]);
    w.providers.set("c", provider("c", "https://git.example.com/org/apps"));
    w.index.reset();
    expect(w.names(APPS_MAIN)).toEqual(["t1"]);
    expect(w.listings()).toBe(2);
  });
});
