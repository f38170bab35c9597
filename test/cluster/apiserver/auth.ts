/**
 * Bearer-token identities. A user either carries allow rules of its own (a request is allowed when
 * any rule matches; "all" is a superuser) or, with "rbac", is authorised by the Roles,
 * ClusterRoles and bindings stored in the cluster (rbac.ts), like a ServiceAccount on a real one.
 */

export interface AuthRule {
  /** get, list, watch, create, update, patch, delete, deletecollection, or "*" */
  verbs: string[];
  /** API groups ("" for core), or "*" */
  groups: string[];
  /** plural resource names, "plural/subresource", or "*" */
  resources: string[];
  /** namespaces the rule covers; absent means every namespace and cluster scope */
  namespaces?: string[];
}

export type UserRules = AuthRule[] | "all" | "rbac";

export interface User {
  name: string;
  /** Groups the user is in (RBAC Group subjects). */
  groups: string[];
  rules: UserRules;
}

/** The username and groups a ServiceAccount's token authenticates as. */
export function serviceAccountUser(namespace: string, name: string): Pick<User, "name" | "groups"> {
  return {
    name: `system:serviceaccount:${namespace}:${name}`,
    groups: ["system:serviceaccounts", `system:serviceaccounts:${namespace}`, "system:authenticated"],
  };
}

export interface Access {
  verb: string;
  group: string;
  resource: string;
  subresource?: string;
  namespace?: string;
}

const has = (list: string[], v: string) => list.includes("*") || list.includes(v);

/** The user's own rules (not "rbac", which rbac.ts decides). */
export function allowed(user: User, a: Access): boolean {
  if (user.rules === "all") return true;
  if (user.rules === "rbac") return false;
  const resource = a.subresource ? `${a.resource}/${a.subresource}` : a.resource;
  return user.rules.some(
    (r) =>
      has(r.verbs, a.verb) &&
      has(r.groups, a.group) &&
      (has(r.resources, resource) ||
        (a.subresource !== undefined && r.resources.includes(`${a.resource}/*`))) &&
      (r.namespaces === undefined || (a.namespace !== undefined && has(r.namespaces, a.namespace))),
  );
}

export class Users {
  private readonly byToken = new Map<string, User>();

  add(name: string, token: string, rules: UserRules, groups?: string[]): void {
    const superuser = rules === "all" ? ["system:masters"] : [];
    this.byToken.set(token, { name, rules, groups: groups ?? [...superuser, "system:authenticated"] });
  }

  tokenOf(name: string): string | undefined {
    for (const [token, u] of this.byToken) if (u.name === name) return token;
    return undefined;
  }

  /** undefined for an unknown token (401). */
  fromAuthorization(header: string | undefined, anonymous: User | undefined): User | undefined {
    if (!header) return anonymous;
    const m = /^Bearer\s+(.+)$/i.exec(header);
    if (!m) return undefined;
    return this.byToken.get(m[1]!.trim());
  }
}
