import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { KINDS } from "../crds/index.js";
import { RESOURCES, resourceOf } from "./resources.js";

const root = new URL("../../", import.meta.url);

describe("the one resource table", () => {
  it("holds every kind we define, as its CRD serves it", () => {
    for (const k of KINDS) {
      const r = resourceOf(k.kind as never) as { plural: string; kind: string };
      expect(r.plural).toBe(k.plural);
    }
  });

  it("finds an entry by its kind, and no entry twice", () => {
    expect(resourceOf("Kustomization")).toBe(RESOURCES.kustomization);
    const kinds = Object.values(RESOURCES).map((r) => r.kind);
    expect(kinds.length).toBe(new Set(kinds).size);
  });

  it("is the only place product code spells where a custom kind is served", () => {
    const files = execFileSync("git", ["ls-files", "queue/**.ts", "sidecar/**.ts", "gateway/**.ts"], {
      cwd: root,
      encoding: "utf8",
    })
      .split("\n")
      .filter((f) => f && !f.endsWith(".test.ts") && !f.endsWith("testing.ts"))
      .filter((f) => f !== "queue/kube/resources.ts" && !f.startsWith("queue/crds/"));
    const spelled: string[] = [];
    for (const file of files)
      readFileSync(new URL(file, root), "utf8")
        .split("\n")
        .forEach((line, i) => {
          // A table entry written out: a plural spelled or named beside a group.
          if (/plural: ("[a-z]+s"|[A-Z_]+_PLURAL)/.test(line)) spelled.push(`${file}:${i + 1}`);
        });
    expect(spelled).toEqual([]);
  });
});
