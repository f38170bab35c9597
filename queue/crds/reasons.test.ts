import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { REASONS as APPLY_REASONS } from "../contract.js";
import { StatusReason } from "./reasons.js";

const root = new URL("../../", import.meta.url);
const all = Object.values(StatusReason) as string[];

/** Reasons that are also other words the product writes (a condition type, a status, a phase). */
const ALSO_OTHER_WORDS = new Set([
  "Accepted", // GitTarget condition type
  "WriteRefused", // GitTarget condition type
  "Published", // the decision core's event, a publication state
  "Retrying", // a publication state
  "Stale", // an attempt's phase
  "Unknown", // a condition status
  "Bound", // a claim's eligibility state
  "NotReferenced", // a claim's eligibility state
  "Suspended", // a FluxClaim's previousSuspendState
]);

function productFiles(): string[] {
  const out = execFileSync("git", ["ls-files", "queue/**.ts", "sidecar/**.ts", "gateway/**.ts"], {
    cwd: root,
    encoding: "utf8",
  });
  return out
    .split("\n")
    .filter(
      (f) => f && !f.endsWith(".test.ts") && !f.endsWith("testing.ts") && f !== "queue/crds/reasons.ts",
    );
}

describe("StatusReason", () => {
  it("names each reason by its own value", () => {
    for (const [key, value] of Object.entries(StatusReason)) expect(value).toBe(key);
  });

  it("is apart from the reasons an apply is due", () => {
    expect(all.filter((r) => (APPLY_REASONS as readonly string[]).includes(r))).toEqual([]);
  });

  it("is documented once each in docs/reasons.md, and the page lists nothing else", () => {
    const page = readFileSync(new URL("docs/reasons.md", root), "utf8");
    const rows = [...page.matchAll(/^\| `([A-Za-z]+)` +\|/gm)].map((m) => m[1] as string);
    const twice = rows.filter((r, i) => rows.indexOf(r) !== i);
    expect(twice).toEqual([]);
    expect([...rows].sort()).toEqual([...all].sort());
  });

  it("is the only place product code spells a reason", () => {
    const known = new Set(all);
    // A literal in a reason's place: `reason: "X"`, `reason === "X"`, `reason ?? "X"`, a ternary.
    const inReasonPlace =
      /\b(?:reason|outcome)\??\s*(?::|===|!==|=|\?\?|\|\|)\s*((?:[^"\n;]*?\?\s*)?"[A-Z]\w*"(?:\s*[:|]\s*(?:[^"\n;]*?\?\s*)?"[A-Z]\w*")*)/g;
    const found: string[] = [];
    for (const file of productFiles()) {
      const lines = readFileSync(new URL(file, root), "utf8").split("\n");
      lines.forEach((line, i) => {
        for (const m of line.matchAll(inReasonPlace))
          for (const lit of (m[1] as string).matchAll(/"([A-Z]\w*)"/g))
            if (known.has(lit[1] as string)) found.push(`${file}:${i + 1} ${lit[1]}`);
        // Anywhere else, a reason that is no other word is still a reason spelled inline.
        for (const lit of line.matchAll(/"([A-Z]\w*)"/g))
          if (known.has(lit[1] as string) && !ALSO_OTHER_WORDS.has(lit[1] as string))
            found.push(`${file}:${i + 1} ${lit[1]}`);
      });
    }
    expect([...new Set(found)]).toEqual([]);
  });
});
