/**
 * Converts the zod subset our kinds use into an OpenAPI v3 structural schema as the API server
 * requires for CRDs: every node has a type, no `$ref`, `additionalProperties` only for maps, unions
 * of strings expressed as value-only `anyOf`, and the Kubernetes extensions carried by `k8s()`.
 * Anything outside the subset throws, so a new zod feature cannot slip into a CRD unconverted.
 */
import { type ZodTypeAny, z } from "zod";
import { k8sExtensionOf } from "./k8s-ext.js";

export interface JSONSchemaProps {
  type?: "object" | "array" | "string" | "integer" | "number" | "boolean";
  description?: string;
  properties?: Record<string, JSONSchemaProps>;
  required?: string[];
  additionalProperties?: JSONSchemaProps;
  items?: JSONSchemaProps;
  enum?: unknown[];
  anyOf?: JSONSchemaProps[];
  pattern?: string;
  format?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  minItems?: number;
  maxItems?: number;
  default?: unknown;
  "x-kubernetes-preserve-unknown-fields"?: boolean;
  "x-kubernetes-list-type"?: string;
  "x-kubernetes-list-map-keys"?: string[];
  "x-kubernetes-validations"?: { rule: string; message: string; fieldPath?: string }[];
}

interface Converted {
  schema: JSONSchemaProps;
  /** False when the field may be left out (optional or defaulted). */
  required: boolean;
}

export function toStructuralSchema(schema: ZodTypeAny): JSONSchemaProps {
  return convert(schema).schema;
}

function convert(schema: ZodTypeAny): Converted {
  const out = convertNode(schema);
  const ext = k8sExtensionOf(schema);
  const description = schema.description;
  // Outer wrappers (optional, default, refine) carry their own description and extensions; merge
  // them over the inner node's without losing the inner ones.
  if (description !== undefined) out.schema.description = description;
  if (ext) {
    if (ext.validations?.length) {
      const inner = out.schema["x-kubernetes-validations"] ?? [];
      const seen = new Set(inner.map((v) => v.rule));
      out.schema["x-kubernetes-validations"] = [
        ...inner,
        ...ext.validations.filter((v) => !seen.has(v.rule)),
      ];
    }
    if (ext.listType) out.schema["x-kubernetes-list-type"] = ext.listType;
    if (ext.listMapKeys) out.schema["x-kubernetes-list-map-keys"] = ext.listMapKeys;
    if (ext.format) out.schema.format = ext.format;
    if (ext.preserveUnknownFields) out.schema["x-kubernetes-preserve-unknown-fields"] = true;
  }
  return out;
}

function convertNode(schema: ZodTypeAny): Converted {
  if (schema instanceof z.ZodOptional) return { schema: convert(schema.unwrap()).schema, required: false };
  if (schema instanceof z.ZodDefault) {
    const inner = convert(schema.removeDefault()).schema;
    return { schema: { ...inner, default: schema._def.defaultValue() }, required: false };
  }
  if (schema instanceof z.ZodEffects) {
    if (schema._def.effect.type !== "refinement")
      throw new Error("only refinements convert to a CRD schema (a transform has no OpenAPI form)");
    return convert(schema.innerType());
  }
  if (schema instanceof z.ZodObject) return { schema: objectSchema(schema), required: true };
  if (schema instanceof z.ZodArray) {
    const out: JSONSchemaProps = { type: "array", items: convert(schema.element).schema };
    if (schema._def.minLength) out.minItems = schema._def.minLength.value;
    if (schema._def.maxLength) out.maxItems = schema._def.maxLength.value;
    return { schema: out, required: true };
  }
  if (schema instanceof z.ZodRecord) {
    return {
      schema: { type: "object", additionalProperties: convert(schema.valueSchema).schema },
      required: true,
    };
  }
  if (schema instanceof z.ZodString) return { schema: stringSchema(schema), required: true };
  if (schema instanceof z.ZodNumber) return { schema: numberSchema(schema), required: true };
  if (schema instanceof z.ZodBoolean) return { schema: { type: "boolean" }, required: true };
  if (schema instanceof z.ZodEnum)
    return { schema: { type: "string", enum: [...schema.options] }, required: true };
  if (schema instanceof z.ZodLiteral) {
    const value = schema.value;
    if (typeof value !== "string") throw new Error("only string literals convert to a CRD schema");
    return { schema: { type: "string", enum: [value] }, required: true };
  }
  if (schema instanceof z.ZodUnion) return { schema: stringUnion(schema.options), required: true };
  throw new Error(`zod type ${schema._def.typeName} has no CRD schema conversion`);
}

function objectSchema(schema: z.AnyZodObject): JSONSchemaProps {
  const properties: Record<string, JSONSchemaProps> = {};
  const required: string[] = [];
  for (const [key, field] of Object.entries(schema.shape as Record<string, ZodTypeAny>)) {
    const c = convert(field);
    properties[key] = c.schema;
    if (c.required) required.push(key);
  }
  const out: JSONSchemaProps = { type: "object", properties };
  if (required.length > 0) out.required = required;
  // zod strips unknown keys by default, as the API server prunes them; passthrough keeps them.
  if (schema._def.unknownKeys === "passthrough") out["x-kubernetes-preserve-unknown-fields"] = true;
  return out;
}

function stringSchema(schema: z.ZodString): JSONSchemaProps {
  const out: JSONSchemaProps = { type: "string" };
  for (const check of schema._def.checks) {
    switch (check.kind) {
      case "min":
        out.minLength = check.value;
        break;
      case "max":
        out.maxLength = check.value;
        break;
      case "regex":
        if (out.pattern) throw new Error("one regex per string: a CRD has a single pattern");
        if (check.regex.flags) throw new Error(`regex flags (${check.regex.flags}) have no CRD form`);
        out.pattern = check.regex.source;
        break;
      case "datetime":
        out.format = "date-time";
        break;
      default:
        throw new Error(`zod string check ${check.kind} has no CRD schema conversion`);
    }
  }
  return out;
}

function numberSchema(schema: z.ZodNumber): JSONSchemaProps {
  const out: JSONSchemaProps = { type: "number" };
  for (const check of schema._def.checks) {
    if (check.kind === "int") out.type = "integer";
    else if (check.kind === "min" && check.inclusive) out.minimum = check.value;
    else if (check.kind === "max" && check.inclusive) out.maximum = check.value;
    else throw new Error(`zod number check ${check.kind} has no CRD schema conversion`);
  }
  return out;
}

/** A union of strings: `type: string` with value-only alternatives, as structural schemas allow. */
function stringUnion(options: readonly ZodTypeAny[]): JSONSchemaProps {
  const alternatives = options.map((o) => convert(o).schema);
  for (const a of alternatives)
    if (a.type !== "string") throw new Error("only unions of strings convert to a CRD schema");
  return {
    type: "string",
    anyOf: alternatives.map(({ type: _type, description: _d, ...valueOnly }) => valueOnly),
  };
}
