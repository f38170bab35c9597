/**
 * How `applygate status` prints its report (pure): a table like `flux get kustomizations`, one
 * GitTarget per row; a block per GitTarget like `argocd app get` when one is named; JSON or YAML
 * of the whole report with `-o`.
 */
import { stringify } from "yaml";
import { age, type StatusReport, type TargetStatus } from "./status-model.js";

export type OutputFormat = "table" | "wide" | "json" | "yaml";

/** Columns padded to their widest cell, separated by three spaces, as kubectl prints them. */
export function table(rows: string[][]): string {
  const widths: number[] = [];
  for (const r of rows) for (const [i, c] of r.entries()) widths[i] = Math.max(widths[i] ?? 0, c.length);
  return rows
    .map((r) =>
      r
        .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
        .join("   ")
        .trimEnd(),
    )
    .join("\n");
}

const claimName = (t: TargetStatus) => (t.claim ? `${t.claim.kind}/${t.claim.name}` : "-");
const writes = (t: TargetStatus) => {
  if (!t.pendingWrites) return "-";
  const n = t.pendingWrites.decided + t.pendingWrites.inCommitWindow;
  return t.intake?.paused ? `${n} (intake paused)` : String(n);
};
const pending = (t: TargetStatus) => (t.pending && t.pending.length > 0 ? t.pending.join(",") : "-");

/** Header and one row per GitTarget; a NAMESPACE column first when more than one namespace is shown. */
export function tableRows(report: StatusReport, wide = false): string[][] {
  const ns = report.scope === "all" || report.scope.length > 1;
  const header = [
    ...(ns ? ["NAMESPACE"] : []),
    "NAME",
    "BRANCH",
    "PATH",
    "CLAIM",
    "WRITES",
    "PENDING",
    "STATE",
    ...(wide ? ["LAST OPERATION", "QUEUE"] : []),
    "WHY",
  ];
  const rows = report.targets.map((t) => {
    const last = t.operations[0];
    return [
      ...(ns ? [t.namespace] : []),
      t.name,
      t.branch,
      t.path,
      claimName(t),
      writes(t),
      pending(t),
      t.state,
      ...(wide
        ? [
            last ? `${last.token} ${last.phase}${last.outcome ? `/${last.outcome}` : ""}` : "-",
            t.queue ? String(t.queue.depth) : "-",
          ]
        : []),
      t.why,
    ];
  });
  return [header, ...rows];
}

/** The block of one GitTarget: everything the report holds, as `argocd app get` lays it out. */
export function detail(t: TargetStatus): string {
  const lines: string[] = [];
  const field = (k: string, v: string) => lines.push(`${`${k}:`.padEnd(18)}${v}`);
  field("GitTarget", `${t.namespace}/${t.name}`);
  field(
    "Branch",
    `${t.branch}${t.branchKey ? `  (${t.branchKey}, tip ${t.tip?.slice(0, 12) ?? "none"})` : ""}`,
  );
  field("Path", t.path);
  field("GitProvider", t.provider);
  field("Suspended", String(t.suspended));
  for (const c of t.conditions)
    field(`  ${c.type}`, `${c.status}${c.reason ? ` ${c.reason}` : ""}${c.message ? `: ${c.message}` : ""}`);
  field("Decisions", t.decisions);
  if (t.pendingWrites)
    field(
      "Pending writes",
      `${t.pendingWrites.decided} decided, not yet published; ${t.pendingWrites.inCommitWindow} in the commit window`,
    );
  if (t.intake)
    field(
      "Intake",
      `${t.intake.paused ? "paused: new writes are refused until a push lands" : t.intake.retrying ? "publication retrying" : "open"}; ${t.intake.chargedBytes} bytes held${t.intake.budgetBytes !== undefined ? ` of a ${t.intake.budgetBytes}-byte budget` : ""}`,
    );
  if (t.barrier !== undefined) field("Barrier", t.barrier === null ? "passed" : "not passed");
  if (t.snapshotsHeldSince) field("Snapshots", `held since ${t.snapshotsHeldSince} while Git is ahead`);
  if (t.claim) {
    field(
      "Claim",
      `${t.claim.kind} ${t.claim.namespace}/${t.claim.name}${t.claim.error ? ` (${t.claim.error})` : ""}`,
    );
    for (const c of t.claim.conditions)
      field(
        `  ${c.type}`,
        `${c.status}${c.reason ? ` ${c.reason}` : ""}${c.message ? `: ${c.message}` : ""}`,
      );
    if (t.claim.lastAppliedCommit) field("Last applied", t.claim.lastAppliedCommit);
  } else field("Claim", "none");
  field("State", t.state);
  field("Pending reasons", t.pending && t.pending.length > 0 ? t.pending.join(", ") : "none");
  if (t.reason) field("This folder's", t.reason);
  field("Why not now", t.why);
  if (t.queue)
    field(
      "Branch queue",
      `${t.queue.depth} inbox entr${t.queue.depth === 1 ? "y" : "ies"}${
        Object.keys(t.queue.byKind).length > 0
          ? ` (${Object.entries(t.queue.byKind)
              .map(([k, n]) => `${n} ${k}`)
              .join(", ")}${t.queue.truncated ? ", more not read" : ""})`
          : ""
      }`,
    );
  lines.push("", "Operations:");
  if (t.operations.length === 0) lines.push("  none");
  else {
    const rows = [["TOKEN", "COMMIT", "REASON", "PHASE", "AGE", "OUTCOME"]];
    for (const o of t.operations)
      rows.push([
        o.token,
        o.commit.slice(0, 12),
        o.reasons.length > 0 ? [...new Set(o.reasons)].join(",") : "-",
        o.phase,
        o.ageSeconds !== undefined ? age(o.ageSeconds) : "-",
        [o.outcome, o.message].filter(Boolean).join(": ") || "-",
      ]);
    lines.push(
      table(rows)
        .split("\n")
        .map((l) => `  ${l}`)
        .join("\n"),
    );
  }
  return lines.join("\n");
}

/** The whole output of one read. */
export function render(report: StatusReport, format: OutputFormat, named: boolean): string {
  if (format === "json") return JSON.stringify(named ? report.targets[0] : report, null, 2);
  if (format === "yaml") return stringify(named ? report.targets[0] : report).trimEnd();
  if (named) return report.targets.map(detail).join("\n\n");
  if (report.targets.length === 0)
    return report.scope === "all"
      ? "No GitTargets found."
      : `No GitTargets found in ${report.scope.join(", ")} namespace.`;
  return table(tableRows(report, format === "wide"));
}
