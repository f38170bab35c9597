/** Helpers the decision core's tests share: a driver that feeds events at a controlled time. */
import type { ApplierRef, ClaimRef, ObjectRef, PhaseReport, ReportPhase } from "../../queue/contract.js";
import type { DecisionAction, DecisionEvent, DecisionState, ListedTarget } from "../../queue/decide/model.js";
import { initialState, step } from "../../queue/decide/step.js";

export const BRANCH = {
  key: "git.example/team/apps@main",
  repository: "https://git.example/team/apps",
  branch: "main",
};

/** A 40-hex commit id made of one repeated hex digit or a number. */
export function sha(n: number | string): string {
  return typeof n === "string" ? n.repeat(40).slice(0, 40) : n.toString(16).padStart(40, "0");
}

/** The commits the decision core's tests name A, B and C (in the order they are made). */
export const A = sha("a");
export const B = sha("b");
export const C = sha("c");

export function fluxClaim(name: string): { claim: ClaimRef; applier: ApplierRef } {
  return {
    claim: { kind: "FluxClaim", namespace: "apps", name },
    applier: { kind: "flux", namespace: "flux-system", name },
  };
}

export function argoClaim(name: string): { claim: ClaimRef; applier: ApplierRef } {
  return {
    claim: { kind: "ArgoCDClaim", namespace: "apps", name },
    applier: { kind: "argocd", namespace: "argocd", name },
  };
}

/** A GitTarget naming an ArgoCDClaim. */
export function argoListed(uid: string, claimName: string, opts: Partial<ListedTarget> = {}): ListedTarget {
  const c = argoClaim(claimName);
  return listed(uid, claimName, {
    claim: c.claim,
    applier: c.applier,
    source: `argocd/${claimName}`,
    ...opts,
  });
}

export function listed(
  uid: string,
  claimName: string | null,
  opts: Partial<ListedTarget> & { sourceName?: string } = {},
): ListedTarget {
  const c = claimName === null ? null : fluxClaim(claimName);
  return {
    uid,
    namespace: "apps",
    name: `gt-${uid}`,
    claim: c?.claim ?? null,
    applier: c?.applier ?? null,
    source: c ? `flux-system/${opts.sourceName ?? claimName}` : null,
    onRefusal: "Ignore",
    suspended: false,
    ...opts,
  };
}

export const cm = (name: string): ObjectRef => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  namespace: "apps",
  name,
});

export function report(
  token: string,
  claimName: string,
  phase: ReportPhase,
  commit?: string,
  claim: ClaimRef = fluxClaim(claimName).claim,
): DecisionEvent {
  const r: PhaseReport = {
    type: "phase",
    token,
    claim,
    branchKey: BRANCH.key,
    phase,
    at: "2026-01-01T00:00:00Z",
    ...(commit ? { commit } : {}),
  };
  return { type: "Report", report: r };
}

/**
 * Feeds events as a shell whose tip holds every GitTarget's folder but those in `absent`: an
 * observation, publication or listing that says nothing of folders gets that read of the tip.
 */
export class Driver {
  state: DecisionState;
  now: number;
  log: DecisionAction[] = [];
  /** The last pending write decided when each flush was asked for. */
  private readonly flushMarks = new Map<number, string | null>();
  /** GitTargets (uids) whose folder the tip lacks. */
  absent = new Set<string>();

  constructor(now = Date.parse("2026-03-01T10:00:00Z")) {
    this.state = initialState(BRANCH, "t");
    this.now = now;
  }

  on(event: DecisionEvent): DecisionAction[] {
    const r = step(this.state, this.withFolders(event), this.now);
    this.state = r.state;
    this.log.push(...r.actions);
    // A flush publishes what was decided when it was asked for, as the branch worker's does.
    for (const f of r.actions)
      if (f.type === "Flush") this.flushMarks.set(f.flush, this.state.unpublished.at(-1)?.entryId ?? null);
    return r.actions;
  }

  private withFolders(e: DecisionEvent): DecisionEvent {
    const present = (uids: string[]) => uids.filter((u) => !this.absent.has(u));
    if ((e.type === "Observed" || e.type === "Published") && e.folders === undefined)
      return { ...e, folders: present(Object.keys(this.state.targets)) };
    if (e.type === "TargetsListed" && e.folders === undefined && this.state.tip !== null)
      return { ...e, folders: { commit: this.state.tip, present: present(e.targets.map((t) => t.uid)) } };
    return e;
  }

  advance(ms: number): DecisionAction[] {
    this.now += ms;
    return this.on({ type: "Tick" });
  }

  /** The flush the last actions asked for, answered as published at `tip`. */
  publish(actions: DecisionAction[], tip: string, upToMark: string | null = null): DecisionAction[] {
    const f = actions.find((a) => a.type === "Flush");
    if (f?.type !== "Flush") throw new Error(`no flush in ${JSON.stringify(actions)}`);
    return this.on({
      type: "Published",
      flush: f.flush,
      upToMark: upToMark ?? this.flushMarks.get(f.flush) ?? null,
      tip,
    });
  }

  /** Lists targets, observes `tip` as the baseline, and lets every applier converge on it. */
  settle(targets: ListedTarget[], tip: string): void {
    this.on({ type: "TargetsListed", targets });
    let out = this.on({ type: "Observed", tip, pushedByUs: false });
    while (out.some((a) => a.type === "Flush")) {
      const sent = sends(this.publish(out, tip));
      out = [];
      for (const a of sent)
        out.push(...this.on(report(a.token, a.claim.name, "Succeeded", a.commit, a.claim)));
    }
  }
}

export function sends(actions: DecisionAction[]) {
  return actions.flatMap((a) => (a.type === "SendAttempt" ? [a.attempt] : []));
}

export function flushes(actions: DecisionAction[]) {
  return actions.filter((a) => a.type === "Flush");
}
