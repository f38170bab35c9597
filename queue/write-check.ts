/**
 * Is a write storable? One check for the gateway (422 at the door) and the branch worker (a write
 * that reaches the inbox some other way is settled as refused, never retried): every object name,
 * namespace, kind and API version must be valid for Kubernetes and make a path the Git layout
 * (queue/git/layout.ts) can store and Git itself accepts (no `.git` component, no `\`, no names of
 * dots and spaces, no NTFS short names or streams), and each object is bounded in nesting depth
 * and size. Pure; names the first bad field.
 */

import { errorMessage } from "./errors.js";
import { groupOfApiVersion } from "./scope.js";

/** Deepest nesting an object may have (the deepest real CRD schemas stay well under 40). */
export const MAX_OBJECT_DEPTH = 64;
/** Largest object, as JSON: etcd's default request limit is 1.5 MiB, so a larger one cannot apply. */
export const MAX_OBJECT_BYTES = 1536 * 1024;

export interface WriteProblem {
  /** `changes.3.object.metadata.name` */
  field: string;
  message: string;
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const KIND = /^[A-Za-z][A-Za-z0-9]*$/;
/**
 * RBAC kinds take any path segment as a name (`system:controller:x`); of those, only names that
 * start and end with a letter or digit and use `._:@+-` between are stored: they cannot spell
 * `.git`, a Windows short name (`git~1`), a path separator or a name of dots and spaces.
 */
const RBAC_NAME = /^[A-Za-z0-9]([A-Za-z0-9._:@+-]*[A-Za-z0-9])?$/;
const RBAC_GROUP = "rbac.authorization.k8s.io";

/** Kinds whose names are DNS-1123 labels rather than subdomains. */
const LABEL_NAMED = new Set(["/Namespace", "/Service"]);

function checkApiVersion(v: string): string | undefined {
  const slash = v.indexOf("/");
  const group = slash < 0 ? "" : v.slice(0, slash);
  const version = slash < 0 ? v : v.slice(slash + 1);
  if (slash >= 0 && (group.length > 253 || !DNS_SUBDOMAIN.test(group)))
    return `API group "${group}" must be a lower-case DNS subdomain`;
  if (version.length > 63 || !DNS_LABEL.test(version))
    return `version "${version}" must be a lower-case DNS label (v1, v1beta1)`;
  return undefined;
}

/** Why a name cannot be stored for this kind, or undefined. */
export function nameProblem(apiVersion: string, kind: string, name: string): string | undefined {
  if (name.length > 253) return "name longer than 253 characters";
  const group = groupOfApiVersion(apiVersion);
  if (group === RBAC_GROUP) {
    return RBAC_NAME.test(name)
      ? undefined
      : `"${name}" is not a storable ${kind} name: letters, digits and ._:@+- only, starting and ending with a letter or digit`;
  }
  if (LABEL_NAMED.has(`${group}/${kind}`)) {
    return name.length <= 63 && DNS_LABEL.test(name)
      ? undefined
      : `"${name}" is not a valid ${kind} name: a lower-case DNS label (a-z, 0-9, -; at most 63)`;
  }
  return DNS_SUBDOMAIN.test(name)
    ? undefined
    : `"${name}" is not a valid ${kind} name: a lower-case DNS subdomain (a-z, 0-9, - and .)`;
}

/** Why a namespace cannot be used, or undefined. */
export function namespaceProblem(namespace: string): string | undefined {
  return namespace.length <= 63 && DNS_LABEL.test(namespace)
    ? undefined
    : `"${namespace}" is not a valid namespace: a lower-case DNS label (a-z, 0-9, -; at most 63)`;
}

/**
 * Nesting depth of a JSON value, counted without recursion (the value may come from a body
 * nested far deeper than the stack allows), stopping once past `limit`.
 */
export function depthExceeds(value: unknown, limit: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length > 0) {
    const [v, d] = stack.pop() as [unknown, number];
    if (v === null || typeof v !== "object") continue;
    if (d > limit) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v as object)) {
      if (child !== null && typeof child === "object") stack.push([child, d + 1]);
    }
  }
  return false;
}

interface RefLike {
  apiVersion: string;
  kind: string;
  name: string;
  namespace?: string | undefined;
}

function refProblem(ref: RefLike, at: string, nameAt: string, nsAt: string): WriteProblem | undefined {
  const api = checkApiVersion(ref.apiVersion);
  if (api) return { field: `${at}.apiVersion`, message: api };
  if (ref.kind.length > 63 || !KIND.test(ref.kind))
    return {
      field: `${at}.kind`,
      message: `"${ref.kind}" is not a kind: letters and digits, starting with a letter`,
    };
  if (ref.namespace !== undefined) {
    const ns = namespaceProblem(ref.namespace);
    if (ns) return { field: nsAt, message: ns };
  }
  const name = nameProblem(ref.apiVersion, ref.kind, ref.name);
  if (name) return { field: nameAt, message: name };
  return undefined;
}

/** Why an object reference (a refusal notice's `object`) cannot name a stored object, or undefined. */
export function objectRefProblem(ref: RefLike, at: string): WriteProblem | undefined {
  return refProblem(ref, at, `${at}.name`, `${at}.namespace`);
}

/** A change as both the intake and the inbox hold it (the contract's shape, loosely typed). */
export type CheckedChange =
  | {
      op: "upsert";
      object: { apiVersion: string; kind: string; metadata: { name: string; namespace?: string } };
      base?: { apiVersion: string; kind: string; metadata: { name: string; namespace?: string } } | undefined;
    }
  | { op: "delete"; ref: RefLike };

/** The first reason a change cannot be stored, or undefined. */
export function changeProblem(c: CheckedChange, i: number): WriteProblem | undefined {
  if (c.op === "delete") {
    const at = `changes.${i}.ref`;
    return refProblem(c.ref, at, `${at}.name`, `${at}.namespace`);
  }
  const at = `changes.${i}.object`;
  const o = c.object;
  const problem = refProblem(
    { apiVersion: o.apiVersion, kind: o.kind, name: o.metadata.name, namespace: o.metadata.namespace },
    at,
    `${at}.metadata.name`,
    `${at}.metadata.namespace`,
  );
  if (problem) return problem;
  const bounded = boundsProblem(o, at);
  if (bounded || !c.base) return bounded;
  const base = c.base;
  const baseAt = `changes.${i}.base`;
  if (
    groupOfApiVersion(base.apiVersion) !== groupOfApiVersion(o.apiVersion) ||
    base.kind !== o.kind ||
    base.metadata.name !== o.metadata.name ||
    (base.metadata.namespace ?? "") !== (o.metadata.namespace ?? "")
  )
    return {
      field: baseAt,
      message: "names another object: a base must have the object's API group, kind, namespace and name",
    };
  return boundsProblem(base, baseAt);
}

/** Nesting depth and size of one object. */
function boundsProblem(o: unknown, at: string): WriteProblem | undefined {
  if (depthExceeds(o, MAX_OBJECT_DEPTH))
    return { field: at, message: `nested deeper than ${MAX_OBJECT_DEPTH} levels` };
  let bytes: number;
  try {
    bytes = Buffer.byteLength(JSON.stringify(o));
  } catch (err) {
    return { field: at, message: `cannot be serialized: ${errorMessage(err)}` };
  }
  if (bytes > MAX_OBJECT_BYTES)
    return { field: at, message: `${bytes} bytes as JSON; at most ${MAX_OBJECT_BYTES}` };
  return undefined;
}

/** The first reason any change of a write cannot be stored, or undefined when all can. */
export function writeProblem(changes: readonly CheckedChange[]): WriteProblem | undefined {
  for (let i = 0; i < changes.length; i++) {
    const p = changeProblem(changes[i] as CheckedChange, i);
    if (p) return p;
  }
  return undefined;
}
