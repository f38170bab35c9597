/** Ajv validators: built-in kinds from builtin-schemas.ts, our kinds from the CRDs in manifests/. */
import { Ajv, type ValidateFunction } from "ajv";
import addFormatsModule from "ajv-formats";
import { crdObjects } from "../../queue/crds/files.js";
import { BUILTIN_SCHEMAS, schemaKey } from "./builtin-schemas.js";

// ajv-formats is CommonJS; its default export arrives wrapped under NodeNext.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (
  ajv: Ajv,
) => Ajv;

const KUBERNETES_KEYWORDS = [
  "x-kubernetes-preserve-unknown-fields",
  "x-kubernetes-list-type",
  "x-kubernetes-list-map-keys",
  "x-kubernetes-validations",
];

function newAjv(): Ajv {
  // useDefaults mirrors the API server's defaulting; CEL rules are not evaluated here.
  const ajv = new Ajv({
    allErrors: true,
    useDefaults: true,
    strict: true,
    allowUnionTypes: true,
    strictRequired: false,
  });
  addFormats(ajv);
  for (const keyword of KUBERNETES_KEYWORDS) ajv.addKeyword({ keyword });
  return ajv;
}

export interface CrdSchemaInfo {
  group: string;
  version: string;
  kind: string;
  plural: string;
  validate: ValidateFunction;
}

/** One validator per kind of ours, compiled from the committed CRD YAML. */
export function crdValidators(): Map<string, CrdSchemaInfo> {
  const ajv = newAjv();
  const out = new Map<string, CrdSchemaInfo>();
  for (const crd of crdObjects() as any[]) {
    for (const v of crd.spec.versions) {
      out.set(schemaKey(`${crd.spec.group}/${v.name}`, crd.spec.names.kind), {
        group: crd.spec.group,
        version: v.name,
        kind: crd.spec.names.kind,
        plural: crd.spec.names.plural,
        validate: ajv.compile(v.schema.openAPIV3Schema),
      });
    }
  }
  return out;
}

const builtinAjv = newAjv();
const builtinValidators = new Map<string, ValidateFunction>(
  Object.entries(BUILTIN_SCHEMAS).map(([key, schema]) => [key, builtinAjv.compile(schema)]),
);

const ours = crdValidators();

/** Validates any object our manifests contain; returns error lines (empty when valid). */
export function validateObject(obj: { apiVersion?: string; kind?: string }): string[] {
  const key = schemaKey(String(obj.apiVersion), String(obj.kind));
  const validate = builtinValidators.get(key) ?? ours.get(key)?.validate;
  if (!validate) return [`no schema for ${key}: add one to test/manifests/builtin-schemas.ts`];
  if (validate(structuredClone(obj))) return [];
  return (validate.errors ?? []).map(
    (e) => `${e.instancePath || "/"} ${e.message} ${JSON.stringify(e.params)}`,
  );
}
