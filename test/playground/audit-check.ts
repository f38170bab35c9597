/**
 * What the simulated API server's audit log says of applygate's components: how many requests
 * each made under its own identity, which were refused (403) or invalid (422), and whether any request came from a
 * superuser other than the simulators and the test setup. The playground test and every scenario
 * assert there were no refusals and no such admin requests.
 */
import type { AuditEvent } from "../cluster/apiserver/index.js";
import type { Component } from "./identities.js";

/** The superusers allowed in the log: the simulators playing Flux and Argo CD, and the setup. */
export const SIMULATOR_USERS = {
  fluxsim: "applygate-sim:fluxsim",
  argosim: "applygate-sim:argosim",
} as const;
const ADMINS_ALLOWED = new Set<string>(["admin", ...Object.values(SIMULATOR_USERS)]);

export interface AuditFindings {
  /** Requests each component made under its ServiceAccount. */
  requests: Partial<Record<Component, number>>;
  /** Component requests the API server refused with 403, as `<component> <verb> <requestURI>`. */
  forbidden: string[];
  /** Component writes the API server refused as invalid under the CRD's schema (422). */
  invalid: string[];
  /** Requests by a superuser (group system:masters) that is neither a simulator nor the setup. */
  admin: string[];
}

const line = (who: string, e: AuditEvent) => `${who} ${e.verb} ${e.requestURI}`;

export function auditFindings(
  events: AuditEvent[],
  identities: Partial<Record<Component, string>>,
): AuditFindings {
  const componentOf = new Map(Object.entries(identities).map(([c, user]) => [user, c as Component]));
  const f: AuditFindings = { requests: {}, forbidden: [], invalid: [], admin: [] };
  for (const e of events) {
    const c = componentOf.get(e.user.username);
    if (c) {
      f.requests[c] = (f.requests[c] ?? 0) + 1;
      if (e.responseStatus.code === 403) f.forbidden.push(line(c, e));
      if (e.responseStatus.code === 422) f.invalid.push(line(c, e));
    }
    if (e.user.groups?.includes("system:masters") && !ADMINS_ALLOWED.has(e.user.username))
      f.admin.push(line(e.user.username, e));
  }
  return f;
}

/** What is wrong in the findings, one line each: refusals, admin requests, a silent component. */
export function auditProblems(f: AuditFindings, components: Component[]): string[] {
  return [
    ...f.forbidden.map((l) => `403 for a component: ${l}`),
    ...f.invalid.map((l) => `422 (invalid under the CRD's schema) for a component: ${l}`),
    ...f.admin.map((l) => `admin request not by a simulator or the setup: ${l}`),
    ...components.filter((c) => !f.requests[c]).map((c) => `no request from ${c} under its ServiceAccount`),
  ];
}
