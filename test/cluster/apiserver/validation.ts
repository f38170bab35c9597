/**
 * Validation of custom resources against their CRD's OpenAPI v3 schema, as the real API server
 * does on every write: types, required fields, enums, patterns, lengths, item counts, bounds and
 * formats (ajv), then the CEL rules of `x-kubernetes-validations` (transition rules, those naming
 * `oldSelf`, only on updates). A failure is a Status cause per field worded like the real server's
 * (`spec.type: Unsupported value: "x": supported values: "github", "gitea"`). Rules see the object
 * with the schema's defaults filled in, as on a real server; the stored object is not defaulted.
 */
import { celEnv, celError, isCelError, parse, plan } from "@bufbuild/cel";
import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import addFormatsModule from "ajv-formats";
import { RE2JS } from "re2js";
import { clone } from "./clone.js";
import type { StatusCause } from "./errors.js";
import type { SchemaNode } from "./types.js";

// ajv-formats is CommonJS; its default export arrives wrapped under NodeNext.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (
  ajv: Ajv,
) => Ajv;

/**
 * Patterns match as Go's regexp matches them (RE2, an unanchored search), never as a JavaScript
 * RegExp would: RE2 has no lookaround and no backreferences (a CRD using them is refused at install,
 * registry.ts), and its classes and flags are Go's.
 */
const re2 = Object.assign(
  (pattern: string) => {
    const re = RE2JS.compile(pattern);
    // ajv keeps one compiled pattern per toString(): each must name its own.
    return { test: (s: string) => re.matcher(s).find(), toString: () => `re2:${pattern}` };
  },
  { code: "re2" },
);

const ajv = new Ajv({
  code: { regExp: re2 },
  allErrors: true,
  verbose: true,
  strict: false,
  allowUnionTypes: true,
  validateFormats: true,
});
addFormats(ajv);
for (const keyword of [
  "x-kubernetes-preserve-unknown-fields",
  "x-kubernetes-list-type",
  "x-kubernetes-list-map-keys",
  "x-kubernetes-map-type",
  "x-kubernetes-int-or-string",
  "x-kubernetes-embedded-resource",
  "x-kubernetes-validations",
])
  ajv.addKeyword({ keyword });

const compiled = new WeakMap<SchemaNode, ValidateFunction>();
/** Compiled once per process for each distinct schema: every API server installs the same CRDs. */
const byText = new Map<string, ValidateFunction>();

function validatorFor(schema: SchemaNode): ValidateFunction {
  let v = compiled.get(schema);
  if (v) return v;
  const text = JSON.stringify(schema);
  v = byText.get(text);
  if (!v) {
    // metadata is the server's to validate, whatever the CRD says of it.
    const { metadata: _m, ...properties } = schema.properties ?? {};
    const required = schema.required as string[] | undefined;
    v = ajv.compile({
      ...schema,
      properties,
      ...(required ? { required: required.filter((r) => r !== "metadata") } : {}),
    });
    byText.set(text, v);
  }
  compiled.set(schema, v);
  return v;
}

/** `/spec/from/0/namespace` → `spec.from[0].namespace`. */
function fieldOf(instancePath: string, child?: string): string {
  const parts = instancePath.split("/").slice(1);
  if (child !== undefined) parts.push(child);
  return parts
    .map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"))
    .reduce((out, p) => (/^\d+$/.test(p) ? `${out}[${p}]` : out ? `${out}.${p}` : p), "");
}

const shown = (v: unknown) => (typeof v === "string" ? JSON.stringify(v) : String(JSON.stringify(v)));

/** One ajv error as the cause the real server gives. */
function causeOf(e: ErrorObject): StatusCause | undefined {
  const field = fieldOf(e.instancePath);
  const value = shown(e.data);
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case "required":
      return {
        reason: "FieldValueRequired",
        field: fieldOf(e.instancePath, String(p.missingProperty)),
        message: "Required value",
      };
    case "type":
      return {
        reason: "FieldValueTypeInvalid",
        field,
        message: `Invalid value: "${typeof e.data === "object" ? (Array.isArray(e.data) ? "array" : "object") : typeof e.data}": ${field} in body must be of type ${p.type}: ${value}`,
      };
    case "enum":
      return {
        reason: "FieldValueNotSupported",
        field,
        message: `Unsupported value: ${value}: supported values: ${(p.allowedValues as unknown[]).map(shown).join(", ")}`,
      };
    case "pattern":
      return {
        reason: "FieldValueInvalid",
        field,
        message: `Invalid value: ${value}: ${field} in body should match '${p.pattern}'`,
      };
    case "format":
      return {
        reason: "FieldValueInvalid",
        field,
        message: `Invalid value: ${value}: ${field} in body must be of type ${p.format}: ${value}`,
      };
    case "minLength":
      return {
        reason: "FieldValueInvalid",
        field,
        message: `Invalid value: ${value}: ${field} in body should be at least ${p.limit} chars long`,
      };
    case "maxLength":
      return {
        reason: "FieldValueTooLong",
        field,
        message: `Too long: may not be more than ${p.limit} bytes`,
      };
    case "minItems":
      return {
        reason: "FieldValueInvalid",
        field,
        message: `Invalid value: ${(e.data as unknown[]).length}: ${field} in body should have at least ${p.limit} items`,
      };
    case "maxItems":
      return {
        reason: "FieldValueTooMany",
        field,
        message: `Too many: ${(e.data as unknown[]).length}: must have at most ${p.limit} items`,
      };
    case "minimum":
    case "maximum":
    case "exclusiveMinimum":
    case "exclusiveMaximum":
      return {
        reason: "FieldValueInvalid",
        field,
        message: `Invalid value: ${value}: ${field} in body should be ${p.comparison === ">=" ? "greater than or equal to" : p.comparison === "<=" ? "less than or equal to" : p.comparison === ">" ? "greater than" : "less than"} ${p.limit}`,
      };
    case "anyOf":
    case "oneOf":
    case "if":
      // Their branches' own errors say what is wrong.
      return undefined;
    default:
      return {
        reason: "FieldValueInvalid",
        field,
        message: `Invalid value: ${value}: ${e.message ?? e.keyword}`,
      };
  }
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** A copy with the schema's `default`s filled in where a field is absent (what a real server stores). */
export function withDefaults(value: unknown, node: SchemaNode | undefined): unknown {
  if (!node) return value;
  if (Array.isArray(value)) return value.map((v) => withDefaults(v, node.items));
  if (!isObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    const child =
      node.properties?.[k] ??
      (typeof node.additionalProperties === "object" ? node.additionalProperties : undefined);
    out[k] = withDefaults(v, child);
  }
  for (const [k, child] of Object.entries(node.properties ?? {}))
    if (out[k] === undefined && child.default !== undefined) out[k] = clone(child.default);
  return out;
}

/** JSON as CEL sees it: objects are maps, integers (by the schema) are ints. */
function celValue(value: unknown, node: SchemaNode | undefined): unknown {
  if (Array.isArray(value)) return value.map((v) => celValue(v, node?.items));
  if (isObject(value))
    return new Map(
      Object.entries(value).map(([k, v]) => [
        k,
        celValue(
          v,
          node?.properties?.[k] ??
            (typeof node?.additionalProperties === "object" ? node.additionalProperties : undefined),
        ),
      ]),
    );
  if (
    typeof value === "number" &&
    (node?.type === "integer" || Number.isInteger(value)) &&
    node?.type !== "number"
  )
    return BigInt(value);
  return value;
}

const celType = (v: unknown) =>
  Array.isArray(v)
    ? "array"
    : isObject(v)
      ? "object"
      : typeof v === "number"
        ? Number.isInteger(v)
          ? "integer"
          : "number"
        : typeof v;

interface CelRule {
  rule: string;
  message?: string;
  messageExpression?: string;
  fieldPath?: string;
  reason?: string;
}

/**
 * Each rule parsed and planned once: a CRD's rules are few and fixed, and parsing one costs more
 * than running it many times over.
 */
const programs = new Map<string, (bindings: Record<string, unknown>) => unknown>();
const env = celEnv();
function runRule(rule: string, bindings: Record<string, unknown>): unknown {
  try {
    let program = programs.get(rule);
    if (!program) {
      program = plan(env, parse(rule)) as (bindings: Record<string, unknown>) => unknown;
      programs.set(rule, program);
    }
    return program(bindings);
  } catch (e) {
    return celError(e);
  }
}

/** Evaluates every `x-kubernetes-validations` rule on the new object (and the old, for transition rules). */
function celCauses(root: unknown, oldRoot: unknown, schema: SchemaNode): StatusCause[] {
  const causes: StatusCause[] = [];
  const walk = (v: unknown, old: unknown, node: SchemaNode | undefined, path: string) => {
    if (!node || v === undefined) return;
    for (const r of (node["x-kubernetes-validations"] as CelRule[] | undefined) ?? []) {
      const transition = /\boldSelf\b/.test(r.rule);
      if (transition && old === undefined) continue;
      const bindings: Record<string, unknown> = { self: celValue(v, node) };
      if (transition) bindings.oldSelf = celValue(old, node);
      const result = runRule(r.rule, bindings);
      const field = `${path}${r.fieldPath ?? ""}`.replace(/^\./, "");
      if (isCelError(result))
        causes.push({
          reason: "FieldValueInvalid",
          field: path.replace(/^\./, ""),
          message: `Invalid value: "${celType(v)}": ${String((result as { message?: string }).message ?? result)} evaluating rule: ${r.rule}`,
        });
      else if (result !== true)
        causes.push({
          reason: r.reason ?? "FieldValueInvalid",
          field,
          message: `Invalid value: "${celType(v)}": ${r.message ?? `failed rule: ${r.rule}`}`,
        });
    }
    if (Array.isArray(v)) {
      // Transition rules inside lists compare items only for map lists, by key; skip the rest.
      for (const [i, item] of v.entries()) walk(item, undefined, node.items, `${path}[${i}]`);
    } else if (isObject(v)) {
      for (const [k, child] of Object.entries(v)) {
        const sub =
          node.properties?.[k] ??
          (typeof node.additionalProperties === "object" ? node.additionalProperties : undefined);
        walk(child, isObject(old) ? old[k] : undefined, sub, `${path}.${k}`);
      }
    }
  };
  walk(root, oldRoot, schema, "");
  return causes;
}

/** Why a custom resource is invalid under its schema (none when it is valid). */
export function schemaCauses(
  schema: SchemaNode,
  object: Record<string, unknown>,
  old?: Record<string, unknown>,
): StatusCause[] {
  const { metadata: _m, ...body } = withDefaults(object, schema) as Record<string, unknown>;
  const validate = validatorFor(schema);
  const causes: StatusCause[] = [];
  if (!validate(body))
    for (const e of validate.errors ?? []) {
      const c = causeOf(e);
      if (c && !causes.some((x) => x.field === c.field && x.message === c.message)) causes.push(c);
    }
  if (causes.length) return causes;
  const { metadata: _o, ...oldBody } = (old ? withDefaults(old, schema) : {}) as Record<string, unknown>;
  return celCauses(body, old ? oldBody : undefined, schema);
}
