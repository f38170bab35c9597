// Reading upstream files from the module cache, pinned by our go.sum (test/real/upstream.ts), and
// picking the install objects Argo CD's harness creates (test/real/argocd.ts).
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ARGOCD_MODULE, installObjects } from "./argocd.js";
import { setDir } from "./tools/go.js";
import { escapeModulePath, goSumHash, upstreamModule } from "./upstream.js";

describe("upstream files from the module cache", () => {
  const made: string[] = [];
  afterEach(async () => {
    for (const d of made.splice(0)) await rm(d, { recursive: true, force: true });
  });

  /** A module cache holding argo-cd at the version our go.mod requires, with `ziphash` as its hash. */
  const fakeCache = async (ziphash: string) => {
    const cache = await mkdtemp(join(tmpdir(), "applygate-modcache-"));
    made.push(cache);
    const version = (await readFile(join(setDir("argocd"), "go.mod"), "utf8")).match(
      /github\.com\/argoproj\/argo-cd\/v3 (v\S+)/,
    )?.[1];
    await mkdir(join(cache, `${ARGOCD_MODULE}@${version}`, "manifests"), { recursive: true });
    await writeFile(join(cache, `${ARGOCD_MODULE}@${version}`, "manifests", "x.yaml"), "kind: X\n");
    await mkdir(join(cache, "cache", "download", ARGOCD_MODULE, "@v"), { recursive: true });
    await writeFile(join(cache, "cache", "download", ARGOCD_MODULE, "@v", `${version}.ziphash`), ziphash);
    return { cache, version: version! };
  };

  it("escapes upper-case letters as Go's module cache does", () => {
    expect(escapeModulePath("github.com/Azure/go-ansiterm")).toBe("github.com/!azure/go-ansiterm");
    expect(escapeModulePath("sigs.k8s.io/kustomize")).toBe("sigs.k8s.io/kustomize");
  });

  it("takes the content hash from go.sum, not the go.mod's", () => {
    const sum = "a.io/m v1.0.0 h1:content=\na.io/m v1.0.0/go.mod h1:gomod=\n";
    expect(goSumHash(sum, "a.io/m", "v1.0.0")).toBe("h1:content=");
    expect(goSumHash(sum, "a.io/m", "v1.0.1")).toBeUndefined();
  });

  it("reads the module at the version go.mod requires when its hash is the one go.sum pins", async () => {
    const goSum = await readFile(join(setDir("argocd"), "go.sum"), "utf8");
    const { cache, version } = await fakeCache("");
    const pinned = goSumHash(goSum, ARGOCD_MODULE, version)!;
    expect(pinned).toMatch(/^h1:/);
    await writeFile(join(cache, "cache", "download", ARGOCD_MODULE, "@v", `${version}.ziphash`), pinned);
    const mod = upstreamModule("argocd", ARGOCD_MODULE, cache);
    expect(mod.version).toBe(version);
    expect(mod.read("manifests/x.yaml")).toBe("kind: X\n");
  });

  it("refuses a module whose content is not the one go.sum pins, and says how to fetch a missing one", async () => {
    const { cache } = await fakeCache("h1:somethingElse=");
    expect(() => upstreamModule("argocd", ARGOCD_MODULE, cache)).toThrow(/go\.sum pins h1:/);
    const empty = await mkdtemp(join(tmpdir(), "applygate-modcache-"));
    made.push(empty);
    expect(() => upstreamModule("argocd", ARGOCD_MODULE, empty)).toThrow(
      /go mod download github\.com\/argoproj/,
    );
    expect(() => upstreamModule("argocd", "example.com/not-required", empty)).toThrow(/requires no/);
  });

  it("creates Argo CD's CRDs first, its identities, RBAC and settings, and none of its workloads", () => {
    const yaml = [
      "kind: ServiceAccount\nmetadata: {name: argocd-application-controller}",
      "kind: StatefulSet\nmetadata: {name: argocd-application-controller}",
      "kind: ConfigMap\nmetadata: {name: argocd-cm}",
      "kind: Service\nmetadata: {name: argocd-repo-server}",
      "kind: CustomResourceDefinition\nmetadata: {name: applications.argoproj.io}",
      "kind: NetworkPolicy\nmetadata: {name: p}",
      "kind: ClusterRoleBinding\nmetadata: {name: argocd-application-controller}",
      "",
    ].join("\n---\n");
    expect(installObjects(yaml).map((o) => o.kind)).toEqual([
      "CustomResourceDefinition",
      "ServiceAccount",
      "ConfigMap",
      "ClusterRoleBinding",
    ]);
  });
});
