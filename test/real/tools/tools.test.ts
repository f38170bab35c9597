import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { setDir } from "./go.js";
import { parseGoMod } from "./gomod.js";
import { buildCommands, ldflags, setKey } from "./recipe.js";
import { fillVersionFlag, TOOL_SETS, toolSet } from "./tools.js";

const goMod = (set: string) => parseGoMod(readFileSync(join(setDir(set), "go.mod"), "utf8"));
const facts = { version: "v1.36.3", time: "2026-09-01T10:00:00Z", requireOf: () => "v0.36.3" };

describe("our tool modules", () => {
  it.each(TOOL_SETS.map((t) => [t.set, t] as const))("%s names what the table builds", (_, tool) => {
    const mod = goMod(tool.set);
    const required = new Set(mod.requires.map((r) => r.path));
    for (const module of [tool.main, ...tool.replacesFrom]) expect(required).toContain(module);
    for (const b of tool.binaries) expect(mod.tools).toContain(b.pkg);
    expect(mod.go).toMatch(/^1\.2[0-6](\.\d+)?$/); // the Go on our machines is 1.26
  });

  it("k8s and argocd build against one Kubernetes release, its staging modules at its version", () => {
    const version = (set: string, path: string) => goMod(set).requires.find((r) => r.path === path)?.version;
    expect(version("argocd", "k8s.io/kubernetes")).toBe(version("k8s", "k8s.io/kubernetes"));
    for (const set of ["k8s", "argocd"]) {
      const staging = goMod(set).replaces.filter((r) => r.path.startsWith("k8s.io/"));
      expect(staging.length).toBeGreaterThan(25);
      expect(new Set(staging.map((r) => r.targetVersion))).toEqual(new Set(["v0.36.3"]));
    }
  });

  it("k8s copies upstream's godebug line", () => {
    expect(goMod("k8s").godebug).toEqual(["default=go1.26"]);
  });

  it("each set's cache key changes with its own go.sum only", () => {
    const keys = TOOL_SETS.map(setKey);
    expect(new Set(keys).size).toBe(TOOL_SETS.length);
    for (const key of keys) expect(key).toMatch(/^[a-z0-9]+-[0-9a-f]{16}$/);
  });
});

describe("the build recipe", () => {
  it("stamps Kubernetes' version where clients read it", () => {
    const flags = ldflags(toolSet("k8s"), facts);
    expect(flags).toMatch(/^-s -w /);
    for (const pkg of ["k8s.io/component-base/version", "k8s.io/client-go/pkg/version"]) {
      expect(flags).toContain(`-X ${pkg}.gitVersion=v1.36.3`);
      expect(flags).toContain(`-X ${pkg}.gitMajor=1`);
      expect(flags).toContain(`-X ${pkg}.gitMinor=36`);
      expect(flags).toContain(`-X ${pkg}.buildDate=2026-09-01T10:00:00Z`);
    }
  });

  it("fills Argo CD's version without the v and its kubectl version from the module graph", () => {
    const flags = ldflags(toolSet("argocd"), { ...facts, version: "v3.5.3" });
    expect(flags).toContain("-X github.com/argoproj/argo-cd/v3/common.version=3.5.3");
    expect(flags).toContain("-X github.com/argoproj/argo-cd/v3/common.kubectlVersion=v0.36.3");
    expect(() => fillVersionFlag("{version}", "main", "", () => "")).toThrow(/not a release/);
  });

  it("builds binaries named like their package in one command, others each to its own file", () => {
    const k8s = buildCommands(toolSet("k8s"), facts, "/out");
    expect(k8s).toHaveLength(1);
    expect(k8s[0]!.slice(-4)).toEqual([
      "/out/",
      "k8s.io/kubernetes/cmd/kube-apiserver",
      "k8s.io/kubernetes/cmd/kube-controller-manager",
      "k8s.io/kubernetes/cmd/kubectl",
    ]);
    const argocd = buildCommands(toolSet("argocd"), { ...facts, version: "v3.5.3" }, "/out");
    expect(argocd).toHaveLength(1);
    expect(argocd[0]!.slice(-3)).toEqual(["-o", "/out/argocd", "github.com/argoproj/argo-cd/v3/cmd"]);
    for (const command of [...k8s, ...argocd]) expect(command).toContain("-trimpath");
  });
});
