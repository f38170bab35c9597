import { describe, expect, it } from "vitest";
import {
  BEGIN,
  deriveReplacements,
  END,
  parseGoMod,
  renderGenerated,
  spliceGenerated,
  stagingReplacements,
} from "./gomod.js";

// The shape of k8s.io/kubernetes's go.mod: staging modules at v0.0.0, mapped to folders.
const kubernetes = parseGoMod(`// generated
module k8s.io/kubernetes

go 1.26.0

godebug default=go1.26

require (
	github.com/blang/semver/v4 v4.0.0
	k8s.io/api v0.0.0
	k8s.io/client-go v0.0.0
	k8s.io/utils v0.0.0-20260108192941-914a6e750570
)

require (
	k8s.io/cri-client v0.0.0 // indirect
	k8s.io/api v0.0.0
)

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/client-go => ./staging/src/k8s.io/client-go
	k8s.io/cri-client => ./staging/src/k8s.io/cri-client
)
`);

describe("parseGoMod", () => {
  it("reads module, go, godebug, requires in blocks and alone, replaces", () => {
    const mod = parseGoMod(`module example.com/a // the module
go 1.26.3
godebug (
	default=go1.25
	x509negativeserial=1
)
require example.com/b v1.2.3
require (
	example.com/c v0.1.0 // indirect
)
replace example.com/d v1.0.0 => example.com/e v1.1.0
replace example.com/f => ../f
tool example.com/b/cmd
`);
    expect(mod.module).toBe("example.com/a");
    expect(mod.go).toBe("1.26.3");
    expect(mod.godebug).toEqual(["default=go1.25", "x509negativeserial=1"]);
    expect(mod.requires).toEqual([
      { path: "example.com/b", version: "v1.2.3" },
      { path: "example.com/c", version: "v0.1.0" },
    ]);
    expect(mod.replaces).toEqual([
      { path: "example.com/d", version: "v1.0.0", target: "example.com/e", targetVersion: "v1.1.0" },
      { path: "example.com/f", target: "../f" },
    ]);
    expect(mod.tools).toEqual(["example.com/b/cmd"]);
  });

  it("refuses a replace to a module without a version", () => {
    expect(() => parseGoMod("replace a.example/x => b.example/y\n")).toThrow(/without a version/);
  });
});

describe("stagingReplacements", () => {
  it("maps every k8s.io/* v0.0.0 requirement to v0.<minor>.<patch>, once, and nothing else", () => {
    expect(stagingReplacements(kubernetes, "v1.36.3")).toEqual([
      { path: "k8s.io/api", target: "k8s.io/api", targetVersion: "v0.36.3" },
      { path: "k8s.io/client-go", target: "k8s.io/client-go", targetVersion: "v0.36.3" },
      { path: "k8s.io/cri-client", target: "k8s.io/cri-client", targetVersion: "v0.36.3" },
    ]);
  });

  it("refuses what is not a Kubernetes release", () => {
    expect(() => stagingReplacements(kubernetes, "v1.37.0-beta.0")).toThrow(
      /not a k8s.io\/kubernetes release/,
    );
    expect(() => stagingReplacements(parseGoMod("module k8s.io/kubernetes\n"), "v1.36.3")).toThrow(/v0.0.0/);
  });
});

describe("deriveReplacements", () => {
  const argo = parseGoMod(`module github.com/argoproj/argo-cd/v3
replace (
	github.com/golang/protobuf => github.com/golang/protobuf v1.5.4
	k8s.io/api => k8s.io/api v0.36.1
	k8s.io/legacy-cloud-providers => k8s.io/legacy-cloud-providers v0.36.1
)
replace github.com/argoproj/argo-cd/gitops-engine => ./gitops-engine
`);

  it("copies published replaces, lets the staging block decide every k8s.io/* module, reports folders", () => {
    const staging = stagingReplacements(kubernetes, "v1.36.3");
    const derived = deriveReplacements([{ module: "argo@v3.5.3", mod: argo }], staging);
    expect(derived.replaces.map((r) => `${r.path} ${r.targetVersion}`)).toEqual([
      "github.com/golang/protobuf v1.5.4",
      "k8s.io/api v0.36.3",
      "k8s.io/client-go v0.36.3",
      "k8s.io/cri-client v0.36.3",
    ]);
    expect(derived.skipped).toEqual([
      {
        from: "argo@v3.5.3",
        replace: { path: "github.com/argoproj/argo-cd/gitops-engine", target: "./gitops-engine" },
      },
    ]);
    expect(derived.godebug).toEqual([]);
  });

  it("without staging keeps upstream's k8s.io lines and copies godebug from the named upstream", () => {
    const derived = deriveReplacements(
      [
        { module: "k8s@v1.36.3", mod: kubernetes },
        { module: "argo@v3.5.3", mod: argo },
      ],
      [],
      "k8s@v1.36.3",
    );
    expect(derived.replaces.map((r) => r.path)).toContain("k8s.io/legacy-cloud-providers");
    expect(derived.godebug).toEqual(["default=go1.26"]);
    expect(() => deriveReplacements([{ module: "argo@v3.5.3", mod: argo }], [], "k8s@v1.36.3")).toThrow(
      /not an upstream/,
    );
  });

  it("refuses two upstreams that replace one module differently, accepts the same line twice", () => {
    const one = parseGoMod("module a\nreplace gopkg.in/yaml.v3 => gopkg.in/yaml.v3 v3.0.1\n");
    const same = parseGoMod("module b\nreplace gopkg.in/yaml.v3 => gopkg.in/yaml.v3 v3.0.1\n");
    const other = parseGoMod("module c\nreplace gopkg.in/yaml.v3 => gopkg.in/yaml.v3 v3.0.0\n");
    expect(
      deriveReplacements([
        { module: "a", mod: one },
        { module: "b", mod: same },
      ]).replaces,
    ).toHaveLength(1);
    expect(() =>
      deriveReplacements([
        { module: "a", mod: one },
        { module: "c", mod: other },
      ]),
    ).toThrow(/a and c replace gopkg.in\/yaml.v3 differently/);
  });
});

describe("the generated section", () => {
  const derived = deriveReplacements(
    [{ module: "k8s@v1.36.3", mod: kubernetes }],
    stagingReplacements(kubernetes, "v1.36.3"),
    "k8s@v1.36.3",
  );
  const generated = renderGenerated(derived, ["k8s@v1.36.3"]);

  it("is appended once, then replaced in place, leaving our own lines alone", () => {
    const ours = "module ours\n\nrequire k8s.io/kubernetes v1.36.3\n";
    const first = spliceGenerated(ours, generated);
    expect(first.startsWith(ours.trimEnd())).toBe(true);
    expect(first).toContain("godebug default=go1.26\nreplace (\n\tk8s.io/api => k8s.io/api v0.36.3\n");
    const withOwnLine = `${first}\nreplace example.com/x => example.com/x v1.0.0\n`;
    const again = spliceGenerated(
      withOwnLine,
      renderGenerated({ ...derived, replaces: [] }, ["k8s@v1.36.3"]),
    );
    expect(again.split(BEGIN)).toHaveLength(2);
    expect(again).not.toContain("k8s.io/api =>");
    expect(again).toContain("replace example.com/x => example.com/x v1.0.0");
    // What was generated reads back as what was derived.
    expect(parseGoMod(first).replaces).toEqual(derived.replaces);
    expect(parseGoMod(first).godebug).toEqual(["default=go1.26"]);
  });

  it("refuses a go.mod whose markers are broken", () => {
    expect(() => spliceGenerated(`module x\n${END}\n${BEGIN}\n`, generated)).toThrow(/broken/);
    expect(() => spliceGenerated(`module x\n${BEGIN}\n`, generated)).toThrow(/broken/);
  });
});
