/** Automated sync as Argo CD 3.5 decides it (IsAutomatedSyncEnabled, autoSync, alreadyAttemptedSync). */
import { isDeepStrictEqual } from "node:util";
import type { Application, Operation } from "./types.js";

/**
 * On when syncPolicy.automated is present and enabled is unset or true. Before 3.1 there is no
 * enabled field at all (the API server prunes it), so a present automated block is on.
 */
export function isAutomatedSyncEnabled(app: Application, hasEnabledField = true): boolean {
  const automated = app.spec.syncPolicy?.automated;
  if (!automated) return false;
  if (!hasEnabledField) return true;
  return automated.enabled === undefined || automated.enabled === null || automated.enabled === true;
}

export interface SyncStatus {
  status: "Synced" | "OutOfSync" | "Unknown";
  revision: string;
  /** Resources that differ from Git (missing or changed, hooks excluded). */
  outOfSync: { group: string; kind: string; name: string; namespace: string; requiresPruning: boolean }[];
  /** How many resources Git holds for the Application (hooks excluded). */
  desiredCount: number;
}

export type AutoSyncDecision = { start: Operation } | { skip: string };

/** The operation automated sync would start now, or why it starts none. */
export function decideAutoSync(app: Application, sync: SyncStatus, hasEnabledField = true): AutoSyncDecision {
  if (!isAutomatedSyncEnabled(app, hasEnabledField)) return { skip: "automated sync is off" };
  if (app.operation) return { skip: "another operation is in progress" };
  if (app.metadata.deletionTimestamp) return { skip: "deletion in progress" };
  if (sync.status !== "OutOfSync") return { skip: `application status is ${sync.status}` };
  const automated = app.spec.syncPolicy?.automated ?? {};
  const prune = automated.prune === true;
  if (!prune && sync.outOfSync.length > 0 && sync.outOfSync.every((r) => r.requiresPruning))
    return { skip: "need to prune extra resources only but automated prune is disabled" };

  const op: Operation = {
    sync: {
      revision: sync.revision,
      prune,
      ...(app.spec.syncPolicy?.syncOptions ? { syncOptions: app.spec.syncPolicy.syncOptions } : {}),
      ...(app.spec.source ? { source: app.spec.source } : {}),
    },
    initiatedBy: { automated: true },
    retry: app.spec.syncPolicy?.retry ?? { limit: 5 },
  };

  const state = app.status?.operationState;
  const result = state?.syncResult;
  const alreadyAttempted = state
    ? result
      ? result.revision === sync.revision && isDeepStrictEqual(result.source, app.spec.source)
      : ["Succeeded", "Failed", "Error"].includes(state.phase)
    : false;
  if (alreadyAttempted && state) {
    if (state.phase !== "Succeeded")
      return { skip: `failed previous sync attempt to ${result?.revision ?? ""} and will not retry` };
    if (automated.selfHeal !== true) return { skip: `most recent sync already to ${sync.revision}` };
    op.sync = {
      ...op.sync,
      autoHealAttemptsCount: (state.operation.sync?.autoHealAttemptsCount ?? 0) + 1,
      resources: sync.outOfSync.map((r) => ({ group: r.group, kind: r.kind, name: r.name })),
    };
  }
  if (prune && automated.allowEmpty !== true && sync.desiredCount === 0 && sync.outOfSync.length > 0)
    return { skip: `Skipping sync attempt to ${sync.revision}: auto-sync will wipe out all resources` };
  return { start: op };
}
