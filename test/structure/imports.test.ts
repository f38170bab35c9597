import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import {
  circles,
  IMPORT_RULES,
  type ImportGraph,
  readImportGraph,
  resolveSpecifier,
  specifiersOf,
  violations,
} from "./import-rules.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
const graph = readImportGraph(root, ["gateway", "queue", "sidecar"]);

/**
 * Imports that break a rule today (none). The list only shrinks: a new violation fails and is
 * named, and an entry that no longer happens fails until removed.
 */
const KNOWN_VIOLATIONS: string[] = [];

/** Import circles today (type imports included): none; the list only shrinks. */
const KNOWN_CIRCLES: string[] = [];

describe("the product's imports", () => {
  it("read the whole product", () => {
    // A reader that found nothing would pass every rule.
    expect(graph.size).toBeGreaterThan(100);
    expect(graph.get("sidecar/tip-check.ts")).toContain("queue/contract.ts");
  });

  it("break no folder rule but the known ones, and each known one still happens", () => {
    const found = violations(graph, IMPORT_RULES);
    expect(
      found.filter((v) => !KNOWN_VIOLATIONS.includes(v.edge)).map((v) => `${v.edge} (${v.rule})`),
    ).toEqual([]);
    const edges = new Set(found.map((v) => v.edge));
    expect(KNOWN_VIOLATIONS.filter((e) => !edges.has(e)).map((e) => `no longer happens: ${e}`)).toEqual([]);
  });

  it("close no new circle, and each known one is still there", () => {
    const found = circles(graph);
    expect(found.filter((c) => !KNOWN_CIRCLES.includes(c))).toEqual([]);
    expect(KNOWN_CIRCLES.filter((c) => !found.includes(c)).map((c) => `no longer a circle: ${c}`)).toEqual(
      [],
    );
  });
});

describe("the import rule checker", () => {
  it("reads every way a file names a module", () => {
    const text = [
      'import { a } from "./a.js";',
      'import type { B } from "../b.js";',
      'import * as c from "zod";',
      'export { d } from "./d.js";',
      'export * from "./e.js";',
      'export type { F } from "./f.js";',
      'import "./side-effect.js";',
      'const g = await import("./g.js");',
      'type H = import("./h.js").H;',
      "// import { no } from './comment.js';",
      "const s = \"import { no } from './string.js'\";",
    ].join("\n");
    expect(specifiersOf("x.ts", text)).toEqual([
      "./a.js",
      "../b.js",
      "zod",
      "./d.js",
      "./e.js",
      "./f.js",
      "./side-effect.js",
      "./g.js",
      "./h.js",
    ]);
  });

  it("resolves a relative specifier to the TypeScript file, and leaves a package alone", () => {
    const exists = (p: string) => p === "queue/worker/tip-record.ts";
    expect(resolveSpecifier("sidecar/tip-check.ts", "../queue/worker/tip-record.js", exists)).toBe(
      "queue/worker/tip-record.ts",
    );
    expect(resolveSpecifier("queue/cli/main.ts", "./applygate.mjs", exists)).toBe("queue/cli/applygate.mjs");
    expect(resolveSpecifier("queue/x.ts", "node:fs", exists)).toBe("node:fs");
  });

  // A planted graph: the product's files with one import each rule forbids.
  const planted: ImportGraph = new Map([
    [
      "sidecar/flux/executor.ts",
      ["queue/contract.ts", "queue/worker/branch-worker.ts", "queue/kube/index.ts"],
    ],
    ["gateway/server.ts", ["queue/keys.ts", "queue/apply/store.ts"]],
    ["sidecar/mirror/mirror.ts", ["queue/decide/index.ts"]],
    ["queue/crds/governance.ts", ["zod", "queue/crds/common.ts", "queue/decide/change-windows.ts"]],
    ["queue/crds/claim.ts", ["zod", "queue/contract.ts", "node:fs", "@kubernetes/client-node"]],
    ["queue/contract.ts", ["zod", "queue/keys.ts"]],
    [
      "queue/decide/model.ts",
      ["queue/contract.ts", "queue/crds/reasons.ts", "queue/governance/model.ts", "queue/decide/window.ts"],
    ],
    ["queue/governance/model.ts", ["queue/crds/governance.ts", "queue/governance/judge.ts"]],
    ["queue/governance/objects.ts", ["queue/governance/model.ts", "queue/decide/index.ts"]],
    ["queue/records.ts", ["queue/keys.ts", "queue/contract.ts"]],
    ["queue/apply/catalog.ts", ["queue/governance/objects.ts", "queue/decide/index.ts"]],
    ["queue/worker/branch-worker.ts", ["queue/apply/store.ts", "queue/decide/index.ts"]],
  ]);

  it("names each planted violation and the rule it breaks, and nothing else", () => {
    const found = violations(planted, IMPORT_RULES);
    expect(found.map((v) => v.edge)).toEqual([
      "gateway/server.ts → queue/apply/store.ts",
      "queue/contract.ts → queue/keys.ts",
      "queue/crds/claim.ts → @kubernetes/client-node",
      "queue/crds/governance.ts → queue/decide/change-windows.ts",
      "queue/decide/model.ts → queue/decide/window.ts",
      "queue/governance/model.ts → queue/governance/judge.ts",
      "queue/governance/objects.ts → queue/decide/index.ts",
      "sidecar/flux/executor.ts → queue/worker/branch-worker.ts",
      "sidecar/mirror/mirror.ts → queue/decide/index.ts",
    ]);
    expect(found.find((v) => v.edge.startsWith("sidecar/flux"))?.rule).toMatch(/gateway and sidecar/);
    expect(found.find((v) => v.edge.startsWith("queue/crds/governance"))?.rule).toMatch(/crds is a leaf/);
    expect(found.find((v) => v.edge.startsWith("queue/decide/model"))?.rule).toMatch(/type leaf/);
    expect(found.find((v) => v.edge.startsWith("queue/governance/model"))?.rule).toMatch(/types only/);
    expect(found.find((v) => v.edge.startsWith("queue/governance/objects"))?.rule).toMatch(/shares between/);
  });

  it("finds a circle and a file importing itself, and none in a tree", () => {
    const graph: ImportGraph = new Map([
      ["a.ts", ["b.ts", "zod"]],
      ["b.ts", ["c.ts"]],
      ["c.ts", ["a.ts", "d.ts"]],
      ["d.ts", []],
      ["e.ts", ["e.ts"]],
      ["f.ts", ["d.ts", "a.ts"]],
    ]);
    expect(circles(graph)).toEqual(["a.ts ⇄ b.ts ⇄ c.ts", "e.ts"]);
    graph.set("c.ts", ["d.ts"]);
    graph.set("e.ts", []);
    expect(circles(graph)).toEqual([]);
  });
});
