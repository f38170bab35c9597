/**
 * Kubernetes-only facts that a zod schema cannot carry by itself (CEL rules, list types, formats,
 * unknown-field preservation). They ride in the schema's `_def`, which zod copies into every derived
 * instance (`.describe()`, `.min()`, ...), and are read by the converter in `openapi.ts`, so the zod
 * schema stays the one place a field is described.
 */
import type { ZodTypeAny, z } from "zod";

export interface CelRule {
  rule: string;
  message: string;
  /** Optional CEL field path reported with the error (e.g. `.path`). */
  fieldPath?: string;
}

export interface K8sExtension {
  validations?: CelRule[];
  listType?: "atomic" | "set" | "map";
  listMapKeys?: string[];
  format?: string;
  preserveUnknownFields?: boolean;
}

const KEY = "applygateK8s";
type WithExt = { _def: { [KEY]?: K8sExtension } };

/** Returns a copy of `schema` carrying the Kubernetes extensions (merged with any it had). */
export function k8s<T extends ZodTypeAny>(schema: T, ext: K8sExtension): T {
  const previous = k8sExtensionOf(schema) ?? {};
  const merged: K8sExtension = { ...previous, ...ext };
  const validations = [...(previous.validations ?? []), ...(ext.validations ?? [])];
  if (validations.length > 0) merged.validations = validations;
  const Ctor = schema.constructor as new (def: unknown) => T;
  return new Ctor({ ...schema._def, [KEY]: merged });
}

export function k8sExtensionOf(schema: ZodTypeAny): K8sExtension | undefined {
  return (schema as unknown as WithExt)._def[KEY];
}

export const IMMUTABLE_RULE = "self == oldSelf";

/**
 * Marks a field immutable with a CEL transition rule. The API server enforces it on update; zod
 * cannot (it sees one object), so code that edits a spec must not change these fields either.
 */
export function immutable<T extends ZodTypeAny>(schema: T, what: string): T {
  return k8s(schema, { validations: [{ rule: IMMUTABLE_RULE, message: `${what} is immutable` }] });
}

/**
 * A rule checked both by zod (`check`) and by the API server (`cel`), written side by side so the two
 * cannot be read apart. Tests in `crds.test.ts` exercise the zod half on the same samples.
 */
export function checked<T extends ZodTypeAny>(
  schema: T,
  rule: CelRule & { check: (value: z.output<T>) => boolean },
): z.ZodEffects<T> {
  const { check, ...cel } = rule;
  const refined = schema.refine((value) => check(value), {
    message: cel.message,
    path: cel.fieldPath ? cel.fieldPath.replace(/^\./, "").split(".") : [],
  });
  return k8s(refined, { validations: [cel] });
}
