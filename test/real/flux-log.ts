// What real Flux did, read from its controllers' JSON logs: controller-runtime tags every line a
// reconcile writes with the object and a reconcileID, and the controllers log each reconcile's
// outcome at info level. The counts fluxsim keeps in memory are read here from those lines.
import { readFileSync } from "node:fs";
import type { FluxController } from "./flux.js";

export interface FluxLogLine {
  msg: string;
  reconcileID?: string;
  namespace?: string;
  name?: string;
  controllerKind?: string;
  revision?: string;
}

export interface ObjectRef {
  namespace: string;
  name: string;
}

/** Lines the API server's warnings put in a reconcile's log (a finalizer name it frowns on). */
const isApiWarning = (msg: string) => msg.includes("prefer a domain-qualified finalizer name");
const isSuspended = (msg: string) => /^reconciliation is suspended for this object$/i.test(msg);

export function parseFluxLog(text: string): FluxLogLine[] {
  const out: FluxLogLine[] = [];
  for (const line of text.split("\n")) {
    if (!line.startsWith("{")) continue;
    try {
      out.push(JSON.parse(line) as FluxLogLine);
    } catch {
      // a line being written as we read
    }
  }
  return out;
}

export interface FluxLog {
  /**
   * Reconciles of one object that got past the suspend check: distinct reconcileIDs that logged
   * something other than an API warning and "reconciliation is suspended". Every such reconcile
   * logs its outcome at info, except a GitRepository's that found its branch unchanged, which logs
   * nothing (and fetched nothing).
   */
  reconciles(kind: "Kustomization" | "GitRepository", ref: ObjectRef): number;
  /** Revisions a Kustomization's server-side apply completed, oldest first. */
  appliedRevisions(ref: ObjectRef): string[];
}

export function fluxLogOf(lines: FluxLogLine[]): FluxLog {
  const of = (kind: string, ref: ObjectRef) =>
    lines.filter((l) => l.controllerKind === kind && l.namespace === ref.namespace && l.name === ref.name);
  return {
    reconciles(kind, ref) {
      const seen = new Map<string, boolean>();
      for (const l of of(kind, ref)) {
        if (!l.reconcileID || isApiWarning(l.msg)) continue;
        seen.set(l.reconcileID, (seen.get(l.reconcileID) ?? true) && !isSuspended(l.msg));
      }
      return [...seen.values()].filter(Boolean).length;
    },
    appliedRevisions(ref) {
      return of("Kustomization", ref)
        .filter((l) => l.msg === "server-side apply completed" && l.revision)
        .map((l) => l.revision as string);
    },
  };
}

export function readFluxLog(paths: Record<FluxController, string>): FluxLog {
  return fluxLogOf(Object.values(paths).flatMap((p) => parseFluxLog(readFileSync(p, "utf8"))));
}
