/**
 * The safety checks of an executor driven without a branch worker (executor tests, benchmarks):
 * no recorded tip (every commit is current, as `redisTipCheck` answers without a record), no
 * edit after the flush, and the claim's standing read from the cluster as the sidecar reads it
 * (with `brought`, what an apply would bring for a claim requiring approval; without it such an
 * attempt starts nothing). A test replaces any of them to drive that rule.
 */
import type { Kube } from "../../queue/kube/index.js";
import type { SafetyChecks } from "../../sidecar/applier-kind.js";
import type { BroughtReader } from "../../sidecar/approval-recheck.js";
import { recheckStanding } from "../../sidecar/standing.js";

export function unrecordedChecks(
  kube: Kube,
  o: Partial<SafetyChecks> = {},
  brought?: BroughtReader,
): SafetyChecks {
  return {
    tip: async () => true,
    freshness: async () => "current",
    standing: (attempt) => recheckStanding(kube, attempt, brought ? { brought } : {}),
    ...o,
  };
}
