/**
 * When the decisions ask whether a newer tip supersedes an operation out, and which applier kinds
 * can have one ended (pure). The rule itself, shared with the Argo CD sidecar, is
 * `judgeSupersession` (`queue/supersession.ts`).
 */
import type { ApplierKind } from "../contract.js";
import { judgeSupersession } from "../supersession.js";
import type { DecisionState } from "./model.js";

export {
  type Ancestry,
  judgeSupersession,
  type NotSupersededBecause,
  type SupersessionVerdict,
} from "../supersession.js";

/**
 * Applier kinds whose operation can be ended from outside once superseded. Argo CD terminates an
 * operation (`status.operationState.phase: Terminating`), in its retry wait too. A Flux operation
 * is one reconcile of a Kustomization resumed for it (nothing stops a running reconcile; it ends
 * by itself and is suspended again), and nothing in the webhook applier's contract stops the
 * tool's apply: both run to their end, which then starts no backoff.
 */
export function endsOnSupersession(kind: ApplierKind): boolean {
  return kind === "argocd";
}

/** One ancestry question the decisions ask the shell: is `commit` a proper ancestor of `tip`? */
export interface AncestryAsked {
  /** The claim key of the applier whose operation it is about. */
  key: string;
  token: string;
  commit: string;
  tip: string;
}

/**
 * The questions the decisions wait for: every operation out of an applier kind that can end one,
 * running (the executor reported it started), overtaken by a foreign tip since it was sent, for
 * another commit than the tip, and not judged at this tip yet.
 */
export function ancestryReadsAsked(s: DecisionState): AncestryAsked[] {
  const asked: AncestryAsked[] = [];
  if (s.tip === null) return asked;
  for (const [key, a] of Object.entries(s.appliers)) {
    const op = a.operation;
    if (!op?.overtaken || !endsOnSupersession(a.applier.kind)) continue;
    if (op.phase !== "Running" && op.phase !== "Unresolved") continue;
    if (op.supersession?.tip === s.tip) continue;
    if (judgeSupersession(op.commit, s.tip).verdict !== "prove") continue;
    asked.push({ key, token: op.token, commit: op.commit, tip: s.tip });
  }
  return asked;
}
