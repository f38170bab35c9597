import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { REASONS as APPLY_REASONS, REPORT_PHASES } from "../contract.js";
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
  "Superseded", // an operation's phase
  "Unknown", // a condition status
  "Bound", // a claim's eligibility state
  "NotReferenced", // a claim's eligibility state
  "Suspended", // a FluxClaim's previousSuspendState
  "Approved", // an approval gate's state
  "Forbidden", // an HTTP status's text (403), as the start-up check names an answer
]);

/**
 * A reason passed by position after a phase (`report("Stale", "Stale", …)`,
 * `new Refusal("RequestFailed", "SourceRequestFailed", …)`): the literal in the reason's place.
 */
const afterPhase = new RegExp(`\\(\\s*"(?:${REPORT_PHASES.join("|")})"\\s*,\\s*["\`]([A-Z]\\w*)["\`]`, "g");

/** Reasons of the table spelled inline (`file:line Reason`): the table is the only place to spell one. */
function spelledInline(file: string, text: string, known: ReadonlySet<string>): string[] {
  const found: string[] = [];
  // A literal in a reason's place: `reason: "X"`, `reason === "X"`, `reason ?? "X"`, a ternary.
  const inReasonPlace =
    /\b(?:reason|outcome)\??\s*(?::|===|!==|=|\?\?|\|\|)\s*((?:[^"\n;]*?\?\s*)?"[A-Z]\w*"(?:\s*[:|]\s*(?:[^"\n;]*?\?\s*)?"[A-Z]\w*")*)/g;
  text.split("\n").forEach((line, i) => {
    for (const m of line.matchAll(inReasonPlace))
      for (const lit of (m[1] as string).matchAll(/"([A-Z]\w*)"/g))
        if (known.has(lit[1] as string)) found.push(`${file}:${i + 1} ${lit[1]}`);
    for (const m of line.matchAll(afterPhase))
      if (known.has(m[1] as string)) found.push(`${file}:${i + 1} ${m[1]}`);
    // Anywhere else, a reason that is no other word is still a reason spelled inline.
    for (const lit of line.matchAll(/"([A-Z]\w*)"/g))
      if (known.has(lit[1] as string) && !ALSO_OTHER_WORDS.has(lit[1] as string))
        found.push(`${file}:${i + 1} ${lit[1]}`);
  });
  return found;
}

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
    const found = productFiles().flatMap((file) =>
      spelledInline(file, readFileSync(new URL(file, root), "utf8"), known),
    );
    expect([...new Set(found)]).toEqual([]);
  });

  it("finds a reason of the table spelled inline in each place one is written", () => {
    const code = [
      'report("RequestFailed", { reason: "NotInControl", message: "m" });',
      'return giveUp("Stale", "Stale", "the commit is no longer the tip");',
      'const r = { phase: "Failed", outcome: ok ? "Applied" : "Stale" };',
      'log.info("NotInControl");',
      'const phase = "Stale";',
    ].join("\n");
    expect(spelledInline("f.ts", code, new Set(all))).toEqual([
      "f.ts:1 NotInControl",
      "f.ts:1 NotInControl",
      "f.ts:2 Stale",
      "f.ts:3 Applied",
      "f.ts:3 Stale",
      "f.ts:3 Applied",
      "f.ts:4 NotInControl",
    ]);
  });

  it("holds every reason product code writes", () => {
    expect(unlistedReasons(productFiles())).toEqual([]);
  });

  it("finds a reason the table does not hold in each place one is written", () => {
    const code = [
      'report("RequestFailed", { reason: "NotInTableA", message: "m" });',
      "type R =",
      "  | { ok: false; reason:",
      '    | "NotInTableB"',
      "    | typeof StatusReason.Stale };",
      'const readyReason = "NotInTableC";',
      'const v = { phase: "Failed", outcome: ok ? "NotInTableD" : "NotInTableE" };',
      'const notice = { reason: "NotInTableF: a free-text reason" };',
      `const t = { reason: \`NotInTableG: \${why}\` };`,
      'throw new Refusal("RequestFailed", "NotInTableH", "the stamp failed");',
    ].join("\n");
    expect(unlistedIn(code)).toEqual([
      { line: 1, reason: "NotInTableA" },
      { line: 3, reason: "NotInTableB" },
      { line: 6, reason: "NotInTableC" },
      { line: 8, reason: "NotInTableF" },
      { line: 9, reason: "NotInTableG" },
      { line: 10, reason: "NotInTableH" },
      { line: 7, reason: "NotInTableD" },
      { line: 7, reason: "NotInTableE" },
    ]);
  });

  it("leaves alone what is not a reason of this table", () => {
    const code = [
      'const k = t.reason === "ForeignCommit" ? t.reason : "Adopt";',
      'const target = { uid, reason: "CatchUp" };',
      'const phase = err.reason === StatusReason.OperationInFlight ? "RequestFailed" : "Dropped";',
      `const r = { reason: StatusReason.Stale, outcome: \`HTTP\${status}\`, message: "Gone away" };`,
      'log.info({ reason: "baseline" }, "fetch");',
    ].join("\n");
    expect(unlistedIn(code)).toEqual([]);
  });
});

/**
 * A reason-shaped literal in a reason's place that the table does not hold: the value or type of
 * a `reason` or `outcome` property or a `…Reason` name (`reason: "X"`, `reason:\n | "X"`,
 * `readyReason = "X"`, both branches of `reason: c ? "X" : "Y"`, a free-text reason `"X: why"`).
 * Member access (`t.reason ? … : "X"`) and the reasons an apply is due are not this table's.
 */
function unlistedIn(text: string): { line: number; reason: string }[] {
  const known = new Set<string>([...all, ...APPLY_REASONS]);
  const direct = /(?<![.\w])(?:reason|outcome|\w*Reason)\??\s*[:=]\s*\|?\s*["`]([A-Z]\w*)(?:["`]|: )/g;
  const ternary =
    /(?<![.\w])(?:reason|outcome|\w*Reason)\??\s*[:=]\s*[^"`\n;,{}]*?\?\s*["`]([A-Z]\w*)["`]\s*:\s*["`]([A-Z]\w*)["`]/g;
  const out: { line: number; reason: string }[] = [];
  for (const re of [direct, afterPhase, ternary])
    for (const m of text.matchAll(re))
      for (const reason of m.slice(1))
        if (reason !== undefined && !known.has(reason))
          out.push({ line: text.slice(0, m.index).split("\n").length, reason });
  return out;
}

function unlistedReasons(files: readonly string[]): string[] {
  const found = files.flatMap((file) =>
    unlistedIn(readFileSync(new URL(file, root), "utf8")).map((u) => `${file}:${u.line} ${u.reason}`),
  );
  return [...new Set(found)].sort();
}
