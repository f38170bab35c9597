/**
 * status.history of a Kustomization (fluxcd/pkg apis/meta history, kustomize-controller v1.7+):
 * newest first, at most five snapshots; a reconcile of the same digest with the same status
 * counts into its snapshot and moves it to the front (pure).
 */
import { wireTime } from "../clock.js";
import { formatDuration } from "../duration.js";

export const MAX_HISTORY = 5;

export interface Snapshot {
  digest: string;
  firstReconciled: string;
  lastReconciled: string;
  lastReconciledDuration: string;
  lastReconciledStatus: string;
  totalReconciliations: number;
  metadata?: Record<string, string>;
}

export function upsertHistory(
  history: Snapshot[] | undefined,
  entry: { digest: string; at: number; durationMs: number; status: string; metadata: Record<string, string> },
): Snapshot[] {
  const list = [...(history ?? [])];
  const now = wireTime(entry.at);
  const i = list.findIndex((s) => s.digest === entry.digest && s.lastReconciledStatus === entry.status);
  if (i >= 0) {
    const s = list[i] as Snapshot;
    const updated: Snapshot = {
      ...s,
      lastReconciled: now,
      lastReconciledDuration: formatDuration(entry.durationMs),
      totalReconciliations: s.totalReconciliations + 1,
      metadata: entry.metadata,
    };
    list.splice(i, 1);
    return [updated, ...list].slice(0, MAX_HISTORY);
  }
  const fresh: Snapshot = {
    digest: entry.digest,
    firstReconciled: now,
    lastReconciled: now,
    lastReconciledDuration: formatDuration(entry.durationMs),
    lastReconciledStatus: entry.status,
    totalReconciliations: 1,
    metadata: entry.metadata,
  };
  return [fresh, ...list].slice(0, MAX_HISTORY);
}
