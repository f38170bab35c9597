/**
 * Attempts for tests: one builder of an Attempt as the branch worker sends it, and the phase
 * report a scripted executor makes for one (the operation recorded on the claim's status, then
 * the phase report on the reports queue), as the sidecar does.
 */
import type { Queue } from "bullmq";
import type { KubeObjects } from "../../queue/apply/index.js";
import type { Attempt, ReportPhase } from "../../queue/contract.js";
import { TERMINAL_PHASES } from "../../queue/contract.js";
import type { RecoveredOperation } from "../../sidecar/applier-kind.js";

/** The commit an attempt is for unless a test says otherwise. */
export const COMMIT = "a".repeat(40);

export interface AttemptFixture extends Partial<Attempt> {
  /**
   * Namespace of the claim, of its applier and of its one GitTarget (default `team-a`), where
   * `claim`, `applier` or `targets` are not given.
   */
  namespace?: string;
}

/**
 * An attempt of FluxClaim `web` (applier Kustomization `web`) for one GitTarget `one` (uid `u1`,
 * ForeignCommit) at commit `a…a` of `https://git.example/r` main, sent at a fixed time, with
 * whatever `fixture` gives instead.
 */
export function makeAttempt(fixture: AttemptFixture = {}): Attempt {
  const { namespace = "team-a", ...over } = fixture;
  return {
    token: "t1",
    claim: { kind: "FluxClaim", namespace, name: "web" },
    applier: { kind: "flux", namespace, name: "web" },
    branchKey: "git.example/r@main",
    repository: "https://git.example/r",
    branch: "main",
    commit: COMMIT,
    targets: [{ uid: "u1", namespace, name: "one", reason: "ForeignCommit" }],
    sentAt: "2026-12-01T11:59:59Z",
    ...over,
  };
}

/**
 * An operation recorded Running on FluxClaim `apps/web` (applier Kustomization `flux-system/web`),
 * as restart recovery offers it to an executor host, with the given token and commit.
 */
export function recoveredOperation(token: string, commit: string): RecoveredOperation {
  return {
    claim: {
      type: { group: "applygate.dev", version: "v1alpha1", plural: "fluxclaims", kind: "FluxClaim" },
      namespace: "apps",
      name: "web",
    },
    applier: { namespace: "flux-system", name: "web" },
    branchKey: "git.example/org/repo@main",
    operation: { token, phase: "Running", commit, targets: [], requestedAt: new Date().toISOString() },
  };
}

/** Outcomes of an attempt that started nothing: no operation is recorded for them. */
const NOT_STARTED: readonly ReportPhase[] = ["RequestFailed", "Rejected", "Dropped", "Stale"];

/**
 * Reports `phase` of attempt `a` as an executor does: the operation on the claim's status (its
 * completion and the last applied commit once it ends; none for an attempt that started
 * nothing), then the phase report. Answers when the report was made (ms since the epoch).
 */
export async function reportPhase(
  objects: Pick<KubeObjects, "patchClaimStatus">,
  reports: Queue,
  a: Attempt,
  phase: ReportPhase,
  reason?: string,
): Promise<number> {
  const terminal = TERMINAL_PHASES.includes(phase);
  if (!NOT_STARTED.includes(phase))
    await objects.patchClaimStatus(
      a.claim,
      () => ({
        operation: {
          token: a.token,
          phase,
          commit: a.commit,
          targets: a.targets.map((t) => ({ uid: t.uid, reason: t.reason })),
          requestedAt: a.sentAt,
          ...(terminal ? { completedAt: new Date().toISOString() } : {}),
        },
        ...(phase === "Succeeded" ? { lastAppliedCommit: a.commit } : {}),
      }),
      "operation-record",
    );
  const at = Date.now();
  await reports.add("phase", {
    type: "phase",
    token: a.token,
    claim: a.claim,
    branchKey: a.branchKey,
    phase,
    at: new Date(at).toISOString(),
    commit: a.commit,
    ...(reason ? { reason } : {}),
  });
  return at;
}
