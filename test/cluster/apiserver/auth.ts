/** Bearer-token identities and allow rules. A request is allowed when any rule of its user matches. */

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

export interface User {
  name: string;
  rules: AuthRule[] | "all";
}

export interface Access {
  verb: string;
  group: string;
  resource: string;
  subresource?: string;
  namespace?: string;
}

const has = (list: string[], v: string) => list.includes("*") || list.includes(v);

export function allowed(user: User, a: Access): boolean {
  if (user.rules === "all") return true;
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

  add(name: string, token: string, rules: AuthRule[] | "all"): void {
    this.byToken.set(token, { name, rules });
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
