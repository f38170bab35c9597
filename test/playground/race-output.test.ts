/**
 * `applygate playground race` and the ready screen, read as a person reads them: on an 80-column
 * terminal every line fits and the `← REVERTED` mark is still there; the hint names a command
 * that runs from a checkout; `kubectl get watchrules` says its count is of writes.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { REPO_ROOT } from "../manifests/kustomize.js";
import { RACE_HINT } from "./main.js";
import { columnWidth, type RaceOutcome, sideBySide, wrap } from "./race.js";

const outcome = (mode: RaceOutcome["mode"], texts: string[], reverted: boolean): RaceOutcome => ({
  mode,
  app: "webhook",
  timeline: texts.map((text, i) => ({ ms: 1234 * (i + 1), text })),
  cluster: reverted ? "blue" : "green",
  reverted,
  revertedBy: reverted ? ["playground-deployer"] : [],
  git: "green",
  commits: reverted ? 4 : 2,
  saves: 2,
  applies: reverted ? ["aaaaaaaaaaaa", "bbbbbbbbbbbb"] : [],
});

describe("the race on an 80-column terminal", () => {
  const own = outcome(
    "own-timers",
    [
      "API edit blue → commit 1a2b3c4",
      "deployer fetched 1a2b3c4",
      "API edit green → commit 5d6e7f8",
      "cluster: green (by user)",
      "cluster: blue (by playground-deployer)  ← REVERTED",
      'Git: 4 commits, ends "green"',
    ],
    true,
  );
  const held = outcome(
    "held",
    ["API edit blue → commit 1a2b3c4", "deployer notified of push 5d6e7f8"],
    false,
  );

  it("keeps every line within 80 columns and the REVERTED mark on screen", () => {
    const lines = sideBySide(own, held, columnWidth(80));
    for (const l of lines) expect(l.length, l).toBeLessThanOrEqual(80);
    const screen = lines.join("\n");
    expect(screen).toContain("← REVERTED");
    expect(screen).toContain("playground-deployer");
    // Each column read down, its wrapped lines joined, as the eye follows them.
    const column = (i: 0 | 1) =>
      lines
        .filter((l) => l.includes(" │ ") || i === 0)
        .map((l) => (l.split(" │ ")[i] ?? "").trim())
        .join(" ")
        .replace(/\s+/g, " ");
    expect(column(0)).toContain('"green" reverted on the way');
    expect(column(0)).toContain("4 commit(s) for 2 saves");
    expect(column(1)).toContain("never reverted");
  });

  it("a wider terminal gets wider columns, and an unknown one 80", () => {
    expect(columnWidth(undefined)).toBe(columnWidth(80));
    expect(columnWidth(160)).toBeGreaterThan(columnWidth(80));
    for (const l of sideBySide(own, held, columnWidth(160))) expect(l.length).toBeLessThanOrEqual(160);
  });

  it("wraps without losing a word", () => {
    const text = "cluster: blue (by playground-deployer)  ← REVERTED";
    const lines = wrap(text, 24, 2);
    for (const l of lines) expect(l.length).toBeLessThanOrEqual(24);
    expect(lines.some((l) => l.includes("← REVERTED"))).toBe(true);
    expect(
      lines
        .map((l) => l.trim())
        .join(" ")
        .replace(/\s+/g, " "),
    ).toBe(text.replace(/\s+/g, " "));
  });
});

describe("what the ready screen and kubectl say", () => {
  it("the race hint is a command that runs from a checkout as it is", () => {
    const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as {
      scripts: Record<string, string>;
    };
    const command = RACE_HINT.trim().split(/\s{2,}/)[0];
    expect(command).toBe("npm start -- race");
    // npm appends what follows `--` to the script: the playground's race.
    expect(`${pkg.scripts.start} race`).toBe("node queue/cli/applygate.mjs playground race");
  });

  it("kubectl get watchrules labels the count as writes (events), not objects", () => {
    const crd = parse(
      readFileSync(join(REPO_ROOT, "manifests/base/crds/applygate.dev_watchrules.yaml"), "utf8"),
    );
    const columns = crd.spec.versions[0].additionalPrinterColumns as {
      name: string;
      jsonPath: string;
      description?: string;
    }[];
    const count = columns.find((c) => c.jsonPath === ".status.mirrored");
    // kubectl prints a column's name in capitals.
    expect(count?.name.toUpperCase()).toBe("MIRRORED WRITES");
    expect(count?.description).toMatch(/events, not objects/);
  });
});
