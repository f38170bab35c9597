import { describe, expect, it } from "vitest";
import type { SnapshotSweep } from "../contract.js";
import { sweepDeletes, sweptDirs } from "./sweep.js";

const cm = (name: string, namespace: string | undefined, labels?: Record<string, string>) =>
  [
    "apiVersion: v1",
    "kind: ConfigMap",
    "metadata:",
    `  name: ${name}`,
    ...(namespace ? [`  namespace: ${namespace}`] : []),
    ...(labels ? ["  labels:", ...Object.entries(labels).map(([k, v]) => `    ${k}: ${v}`)] : []),
    "",
  ].join("\n");

const sweep = (over: Partial<SnapshotSweep> = {}): SnapshotSweep => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  namespaces: ["team"],
  live: ["team/live"],
  ...over,
});

describe("the snapshot sweep", () => {
  it("lists the kind's folder in each swept namespace, or its cluster-scope folder", () => {
    expect(sweptDirs("clusters/dev", sweep({ namespaces: ["a", "b"] }))).toEqual([
      { dir: "clusters/dev/core/configmap/a", namespace: "a" },
      { dir: "clusters/dev/core/configmap/b", namespace: "b" },
    ]);
    expect(
      sweptDirs(".", {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRole",
        namespaces: [],
        live: [],
      }),
    ).toEqual([{ dir: "rbac.authorization.k8s.io/clusterrole/_cluster" }]);
  });

  it("deletes the files of objects gone live, never a live one's", () => {
    const files = [
      { name: "live.yaml", content: cm("live", "team") },
      { name: "gone.yaml", content: cm("gone", "team") },
    ];
    expect(sweepDeletes(sweep(), "team", files)).toEqual([
      { apiVersion: "v1", kind: "ConfigMap", name: "gone", namespace: "team" },
    ]);
  });

  it("leaves a gone object the rule's selector does not match (another rule's), by its stored labels", () => {
    const files = [
      { name: "web.yaml", content: cm("web", "team", { app: "web" }) },
      { name: "db.yaml", content: cm("db", "team", { app: "db" }) },
      { name: "bare.yaml", content: cm("bare", "team") },
    ];
    const s = sweep({ selector: { matchLabels: { app: "web" } }, live: [] });
    expect(sweepDeletes(s, "team", files).map((r) => r.name)).toEqual(["web"]);
  });

  it("leaves what it cannot tell is the kind's: another kind, a mismatched name, unparsable YAML, not YAML", () => {
    const files = [
      { name: "s.yaml", content: "apiVersion: v1\nkind: Secret\nmetadata: { name: s, namespace: team }\n" },
      { name: "x.yaml", content: cm("y", "team") },
      { name: "bad.yaml", content: "a: [\n" },
      { name: "other-ns.yaml", content: cm("other-ns", "elsewhere") },
      { name: "README.md", content: "hi" },
      {
        name: "apps.yaml",
        content: "apiVersion: example.com/v1\nkind: ConfigMap\nmetadata: { name: apps, namespace: team }\n",
      },
    ];
    expect(sweepDeletes(sweep({ live: [] }), "team", files)).toEqual([]);
  });

  it("a cluster-scoped kind's live set has no namespace", () => {
    const s: SnapshotSweep = { apiVersion: "v1", kind: "Namespace", namespaces: [], live: ["/kept"] };
    const ns = (n: string) => ({
      name: `${n}.yaml`,
      content: `apiVersion: v1\nkind: Namespace\nmetadata: { name: ${n} }\n`,
    });
    expect(sweepDeletes(s, undefined, [ns("kept"), ns("gone")])).toEqual([
      { apiVersion: "v1", kind: "Namespace", name: "gone" },
    ]);
  });
});
