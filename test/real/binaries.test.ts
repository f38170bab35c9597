import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { BUILD_COMMAND, CONTROL_PLANE, findRealBinaries } from "./binaries.js";
import { binDir } from "./tools/recipe.js";
import { TOOL_SETS } from "./tools/tools.js";

const roots: string[] = [];
const freshRoot = (): string => {
  const root = mkdtempSync(join(tmpdir(), "real-bin-"));
  roots.push(root);
  return root;
};
afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

const place = (file: string): void => {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, "");
};

describe("findRealBinaries", () => {
  it("in an empty cache names every binary and the one command that builds them", () => {
    const found = findRealBinaries(undefined, freshRoot());
    expect(found.built).toBe(false);
    if (found.built) return;
    expect(found.missing).toEqual(
      expect.arrayContaining(["kube-apiserver", "etcd", "argocd-repo-server", "helm"]),
    );
    expect(found.message).toContain(BUILD_COMMAND);
  });

  it("finds each binary in its own set's folder once all are there", () => {
    const root = freshRoot();
    for (const tool of TOOL_SETS) {
      for (const name of [...tool.binaries.map((b) => b.name), ...Object.keys(tool.aliases ?? {})]) {
        place(join(binDir(tool, root), name));
      }
    }
    const found = findRealBinaries(undefined, root);
    if (!found.built) throw new Error(found.message);
    expect(found.path("kube-apiserver")).toBe(
      join(binDir(TOOL_SETS.find((t) => t.set === "k8s")!, root), "kube-apiserver"),
    );
    expect(
      found.path("argocd-repo-server").startsWith(binDir(TOOL_SETS.find((t) => t.set === "argocd")!, root)),
    ).toBe(true);
    expect(found.dirs).toHaveLength(TOOL_SETS.length);
  });

  it("a build of another version (another folder) does not count", () => {
    const root = freshRoot();
    for (const tool of TOOL_SETS) {
      for (const b of tool.binaries) place(join(root, `${tool.set}-0000000000000000`, "bin", b.name));
    }
    const found = findRealBinaries(undefined, root);
    expect(found.built).toBe(false);
  });

  it("asked for the control plane only, needs only its three binaries", () => {
    const root = freshRoot();
    const k8s = TOOL_SETS.find((t) => t.set === "k8s")!;
    const etcd = TOOL_SETS.find((t) => t.set === "etcd")!;
    place(join(binDir(k8s, root), "kube-apiserver"));
    place(join(binDir(etcd, root), "etcd"));
    const partial = findRealBinaries(CONTROL_PLANE, root);
    expect(partial.built ? [] : partial.missing).toEqual(["kube-controller-manager"]);
    place(join(binDir(k8s, root), "kube-controller-manager"));
    expect(findRealBinaries(CONTROL_PLANE, root).built).toBe(true);
    expect(findRealBinaries(undefined, root).built).toBe(false);
  });
});
