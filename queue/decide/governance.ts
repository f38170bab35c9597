/**
 * Release governance in the decision core (pure): rules that make an applier not due, and what
 * its claim shows of them. Change windows: outside an allowed window (or inside a deny window) no
 * apply starts and every reason stays pending, unless a person set a one-apply override on the
 * claim; the core wakes at the next opening and decides then.
 */
import { type ChangeWindowSpec, judgeChangeWindows, type WindowVerdict } from "./change-windows.js";
import type { ApplierState, TargetState } from "./model.js";

/** What the listing reads of governance for one GitTarget and the claim it names. */
export interface TargetGovernance {
  /** The change windows in force: the claim's own (`spec.changeWindows`), else the GitTarget's. */
  changeWindows: ChangeWindowSpec[];
  /** The claim's override annotation, and who set it when managedFields say. */
  override?: { value: string; by?: string };
  /** The override the claim's status records as used (by the attempt `token`). */
  overrideUsed?: OverrideUse;
}

export interface OverrideUse {
  value: string;
  token: string;
  by?: string;
}

/** What an applier's claim shows of governance; written when it changes. */
export interface ClaimGate {
  /** `ApplyAllowed`; null when no control is configured (the condition is left alone). */
  condition: { status: "True" | "False"; reason: string; message: string } | null;
  changeWindow?: { open: boolean; nextOpening?: string; closesAt?: string };
  overrideUsed?: OverrideUse | null;
}

const iso = (t: number) => new Date(t).toISOString();

/** The windows of every GitTarget naming the applier, counted together (a claim's own appear once). */
export function windowsOf(named: readonly Pick<TargetState, "governance">[]): ChangeWindowSpec[] {
  const seen = new Set<string>();
  const out: ChangeWindowSpec[] = [];
  for (const t of named) {
    for (const w of t.governance?.changeWindows ?? []) {
      const k = JSON.stringify([w.kind, w.schedule, w.duration, w.timeZone ?? "UTC"]);
      if (seen.has(k)) continue;
      seen.add(k);
      out.push(w);
    }
  }
  return out;
}

/** The override the claim offers now, if it has not been used: a value no apply has used yet. */
export function overrideAvailable(
  a: ApplierState,
  named: readonly TargetState[],
): { value: string; by?: string } | null {
  const offered = named.find((t) => t.governance?.override)?.governance?.override;
  if (!offered) return null;
  const used =
    a.overrideUsed !== undefined
      ? a.overrideUsed
      : (named.find((t) => t.governance?.overrideUsed)?.governance?.overrideUsed ?? null);
  return used?.value === offered.value ? null : offered;
}

export interface WindowGate {
  verdict: WindowVerdict;
  /** Closed, but a one-apply override lets the next attempt through. */
  override: { value: string; by?: string } | null;
}

export function windowGate(a: ApplierState, named: readonly TargetState[], now: number): WindowGate {
  const verdict = judgeChangeWindows(windowsOf(named), now);
  const closed = verdict.state === "Closed" || verdict.state === "Invalid";
  return { verdict, override: closed ? overrideAvailable(a, named) : null };
}

/** Why governance holds the applier now, or null (for `notDueBecause`). */
export function governanceHolds(a: ApplierState, named: readonly TargetState[], now: number): string | null {
  const g = windowGate(a, named, now);
  if ((g.verdict.state === "Closed" || g.verdict.state === "Invalid") && g.override === null)
    return "outside change window";
  return null;
}

/** When the core must look again: the next opening, or the next close of an open window. */
export function governanceWakeAt(named: readonly TargetState[], now: number): number | null {
  const v = judgeChangeWindows(windowsOf(named), now);
  if (v.state === "Closed") return v.opensAt;
  if (v.state === "Open") return v.closesAt;
  return null;
}

/** What the claim shows: `ApplyAllowed` with the reason and the next opening, and the override used. */
export function claimGate(a: ApplierState, named: readonly TargetState[], now: number): ClaimGate {
  const { verdict: v, override } = windowGate(a, named, now);
  const used = a.overrideUsed !== undefined ? { overrideUsed: a.overrideUsed } : {};
  switch (v.state) {
    case "Unrestricted":
      return { condition: null, ...used };
    case "Open":
      return {
        condition: {
          status: "True",
          reason: "InsideChangeWindow",
          message:
            v.closesAt === null
              ? "inside a change window"
              : `inside a change window until ${iso(v.closesAt)}`,
        },
        changeWindow: { open: true, ...(v.closesAt !== null ? { closesAt: iso(v.closesAt) } : {}) },
        ...used,
      };
    case "Closed": {
      const next = v.opensAt === null ? "no opening within 400 days" : `next opening ${iso(v.opensAt)}`;
      const why = v.by === "deny" ? "inside a deny window" : "outside every allow window";
      return {
        condition: override
          ? {
              status: "True",
              reason: "ChangeWindowOverride",
              message: `${why}; override ${JSON.stringify(override.value)} lets one apply start (${next})`,
            }
          : {
              status: "False",
              reason: "OutsideChangeWindow",
              message: `${why}: no apply starts and reasons stay pending; ${next}`,
            },
        changeWindow: { open: false, ...(v.opensAt !== null ? { nextOpening: iso(v.opensAt) } : {}) },
        ...used,
      };
    }
    case "Invalid":
      return {
        condition: override
          ? {
              status: "True",
              reason: "ChangeWindowOverride",
              message: `${v.message}; override ${JSON.stringify(override.value)} lets one apply start`,
            }
          : {
              status: "False",
              reason: "InvalidChangeWindow",
              message: `${v.message}: no apply starts until it is fixed`,
            },
        changeWindow: { open: false },
        ...used,
      };
  }
}
