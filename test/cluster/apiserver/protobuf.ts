/**
 * Request bodies in Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`), which
 * kubectl's typed clients send for built-in kinds (`kubectl create namespace|configmap|secret …`).
 * The body is the magic `k8s\0` and a runtime.Unknown: typeMeta (apiVersion, kind) and the raw
 * bytes of the object's own message. We decode the built-in kinds this server serves, by the field
 * numbers of k8s.io/api's and k8s.io/apimachinery's generated.proto, into the JSON object the
 * real server would hold. Zero values are dropped as Go's `omitempty` drops them (the generated
 * marshallers write every non-pointer field, empty or not); pointer fields keep what was sent.
 * A field number we do not know is refused, so a gap here fails loudly instead of losing data.
 */
import { errors } from "./errors.js";

export const protobufMediaType = "application/vnd.kubernetes.protobuf";
const magic = Buffer.from([0x6b, 0x38, 0x73, 0x00]); // "k8s\0"

type Scalar = "string" | "bytes" | "bool" | "int" | "time" | "fieldsV1";
interface Field {
  name: string;
  /** a scalar, a message name, or a map with string keys */
  type: Scalar | { message: string } | { map: "string" | "bytes" };
  repeated?: boolean;
  /** a Go pointer field: sent only when set, so its zero value is meaningful */
  pointer?: boolean;
}
type Message = Record<number, Field>;

const s = (name: string, extra: Partial<Field> = {}): Field => ({ name, type: "string", ...extra });
const msg = (name: string, message: string, extra: Partial<Field> = {}): Field => ({
  name,
  type: { message },
  ...extra,
});

const schema: Record<string, Message> = {
  TypeMeta: { 1: s("apiVersion"), 2: s("kind") },
  Unknown: {
    1: msg("typeMeta", "TypeMeta"),
    2: { name: "raw", type: "bytes" },
    3: s("contentEncoding"),
    4: s("contentType"),
  },
  ObjectMeta: {
    1: s("name"),
    2: s("generateName"),
    3: s("namespace"),
    4: s("selfLink"),
    5: s("uid"),
    6: s("resourceVersion"),
    7: { name: "generation", type: "int" },
    8: { name: "creationTimestamp", type: "time" },
    9: { name: "deletionTimestamp", type: "time" },
    10: { name: "deletionGracePeriodSeconds", type: "int", pointer: true },
    11: { name: "labels", type: { map: "string" } },
    12: { name: "annotations", type: { map: "string" } },
    13: msg("ownerReferences", "OwnerReference", { repeated: true }),
    14: s("finalizers", { repeated: true }),
    17: msg("managedFields", "ManagedFieldsEntry", { repeated: true }),
  },
  OwnerReference: {
    5: s("apiVersion"),
    1: s("kind"),
    3: s("name"),
    4: s("uid"),
    6: { name: "controller", type: "bool", pointer: true },
    7: { name: "blockOwnerDeletion", type: "bool", pointer: true },
  },
  ManagedFieldsEntry: {
    1: s("manager"),
    2: s("operation"),
    3: s("apiVersion"),
    4: { name: "time", type: "time" },
    6: s("fieldsType"),
    7: { name: "fieldsV1", type: "fieldsV1" },
    8: s("subresource"),
  },
  LabelSelector: {
    1: { name: "matchLabels", type: { map: "string" } },
    2: msg("matchExpressions", "LabelSelectorRequirement", { repeated: true }),
  },
  LabelSelectorRequirement: { 1: s("key"), 2: s("operator"), 3: s("values", { repeated: true }) },
  DeleteOptions: {
    1: { name: "gracePeriodSeconds", type: "int", pointer: true },
    2: msg("preconditions", "Preconditions", { pointer: true }),
    3: { name: "orphanDependents", type: "bool", pointer: true },
    4: s("propagationPolicy", { pointer: true }),
    5: s("dryRun", { repeated: true }),
  },
  Preconditions: { 1: s("uid", { pointer: true }), 2: s("resourceVersion", { pointer: true }) },
  // core/v1
  Namespace: {
    1: msg("metadata", "ObjectMeta"),
    2: msg("spec", "NamespaceSpec"),
    3: msg("status", "NamespaceStatus"),
  },
  NamespaceSpec: { 1: s("finalizers", { repeated: true }) },
  NamespaceStatus: { 1: s("phase"), 2: msg("conditions", "NamespaceCondition", { repeated: true }) },
  NamespaceCondition: {
    1: s("type"),
    2: s("status"),
    4: { name: "lastTransitionTime", type: "time" },
    5: s("reason"),
    6: s("message"),
  },
  ConfigMap: {
    1: msg("metadata", "ObjectMeta"),
    2: { name: "data", type: { map: "string" } },
    3: { name: "binaryData", type: { map: "bytes" } },
    4: { name: "immutable", type: "bool", pointer: true },
  },
  Secret: {
    1: msg("metadata", "ObjectMeta"),
    2: { name: "data", type: { map: "bytes" } },
    3: s("type"),
    4: { name: "stringData", type: { map: "string" } },
    5: { name: "immutable", type: "bool", pointer: true },
  },
  ServiceAccount: {
    1: msg("metadata", "ObjectMeta"),
    2: msg("secrets", "ObjectReference", { repeated: true }),
    3: msg("imagePullSecrets", "LocalObjectReference", { repeated: true }),
    4: { name: "automountServiceAccountToken", type: "bool", pointer: true },
  },
  ObjectReference: {
    1: s("kind"),
    2: s("namespace"),
    3: s("name"),
    4: s("uid"),
    5: s("apiVersion"),
    6: s("resourceVersion"),
    7: s("fieldPath"),
  },
  LocalObjectReference: { 1: s("name") },
  // rbac.authorization.k8s.io/v1
  Role: { 1: msg("metadata", "ObjectMeta"), 2: msg("rules", "PolicyRule", { repeated: true }) },
  ClusterRole: {
    1: msg("metadata", "ObjectMeta"),
    2: msg("rules", "PolicyRule", { repeated: true }),
    3: msg("aggregationRule", "AggregationRule", { pointer: true }),
  },
  AggregationRule: { 1: msg("clusterRoleSelectors", "LabelSelector", { repeated: true }) },
  PolicyRule: {
    1: s("verbs", { repeated: true }),
    2: s("apiGroups", { repeated: true }),
    3: s("resources", { repeated: true }),
    4: s("resourceNames", { repeated: true }),
    5: s("nonResourceURLs", { repeated: true }),
  },
  RoleBinding: {
    1: msg("metadata", "ObjectMeta"),
    2: msg("subjects", "Subject", { repeated: true }),
    3: msg("roleRef", "RoleRef"),
  },
  ClusterRoleBinding: {
    1: msg("metadata", "ObjectMeta"),
    2: msg("subjects", "Subject", { repeated: true }),
    3: msg("roleRef", "RoleRef"),
  },
  Subject: { 1: s("kind"), 2: s("apiGroup"), 3: s("name"), 4: s("namespace") },
  RoleRef: { 1: s("apiGroup"), 2: s("kind"), 3: s("name") },
  // autoscaling/v1
  Scale: { 1: msg("metadata", "ObjectMeta"), 2: msg("spec", "ScaleSpec"), 3: msg("status", "ScaleStatus") },
  ScaleSpec: { 1: { name: "replicas", type: "int" } },
  ScaleStatus: { 1: { name: "replicas", type: "int" }, 2: s("selector") },
};

/** The message each apiVersion/kind is encoded as. */
const rootMessages: Record<string, string> = {
  "v1/Namespace": "Namespace",
  "v1/ConfigMap": "ConfigMap",
  "v1/Secret": "Secret",
  "v1/ServiceAccount": "ServiceAccount",
  "v1/DeleteOptions": "DeleteOptions",
  "meta.k8s.io/v1/DeleteOptions": "DeleteOptions",
  "rbac.authorization.k8s.io/v1/Role": "Role",
  "rbac.authorization.k8s.io/v1/ClusterRole": "ClusterRole",
  "rbac.authorization.k8s.io/v1/RoleBinding": "RoleBinding",
  "rbac.authorization.k8s.io/v1/ClusterRoleBinding": "ClusterRoleBinding",
  "autoscaling/v1/Scale": "Scale",
};

class Reader {
  pos = 0;
  constructor(
    private readonly buf: Buffer,
    private readonly where: string,
  ) {}

  done(): boolean {
    return this.pos >= this.buf.length;
  }

  fail(why: string): never {
    throw errors.badRequest(`error decoding request body: protobuf ${this.where}: ${why}`);
  }

  varint(): bigint {
    let result = 0n;
    for (let shift = 0n; shift < 70n; shift += 7n) {
      if (this.pos >= this.buf.length) this.fail("truncated varint");
      const b = this.buf[this.pos++]!;
      result |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return result;
    }
    return this.fail("varint too long");
  }

  bytes(): Buffer {
    const n = Number(this.varint());
    if (this.pos + n > this.buf.length) this.fail("truncated field");
    const out = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
}

const zeroTimeSeconds = -62135596800; // Go's zero time.Time, 0001-01-01T00:00:00Z

function decodeTime(buf: Buffer): string | undefined {
  const r = new Reader(buf, "Time");
  let seconds = 0;
  let nanos = 0;
  while (!r.done()) {
    const tag = Number(r.varint());
    if (tag === 1 << 3) seconds = Number(BigInt.asIntN(64, r.varint()));
    else if (tag === 2 << 3) nanos = Number(BigInt.asIntN(32, r.varint()));
    else r.fail(`unknown field tag ${tag}`);
  }
  if (seconds === 0 && nanos === 0) return undefined;
  if (seconds === zeroTimeSeconds) return undefined;
  return new Date(seconds * 1000).toISOString().replace(".000Z", "Z");
}

function isZero(v: unknown): boolean {
  if (v === undefined || v === "" || v === 0 || v === false) return true;
  if (Array.isArray(v)) return v.length === 0;
  if (typeof v === "object" && v !== null) return Object.keys(v).length === 0;
  return false;
}

function decodeMessage(name: string, buf: Buffer): Record<string, unknown> {
  const fields = schema[name];
  if (!fields) throw errors.badRequest(`error decoding request body: protobuf message ${name} is not served`);
  const r = new Reader(buf, name);
  const out: Record<string, unknown> = {};
  while (!r.done()) {
    const tag = Number(r.varint());
    const number = tag >>> 3;
    const wire = tag & 7;
    const f = fields[number];
    if (!f) return r.fail(`field ${number} is not one this server decodes`);
    let value: unknown;
    if (wire === 0) {
      const raw = r.varint();
      if (f.type === "bool") value = raw !== 0n;
      else if (f.type === "int") value = Number(BigInt.asIntN(64, raw));
      else r.fail(`field ${f.name} sent as a varint`);
    } else if (wire === 2) {
      const raw = r.bytes();
      const t = f.type;
      if (t === "string") value = raw.toString("utf8");
      else if (t === "bytes") value = raw.toString("base64");
      else if (t === "time") value = decodeTime(raw);
      else if (t === "fieldsV1") value = decodeFieldsV1(raw);
      else if (typeof t === "object" && "message" in t) value = decodeMessage(t.message, raw);
      else if (typeof t === "object" && "map" in t) {
        const entry = decodeMapEntry(raw, t.map, `${name}.${f.name}`);
        const map = (out[f.name] ?? {}) as Record<string, string>;
        map[entry.key] = entry.value;
        out[f.name] = map;
        continue;
      } else r.fail(`field ${f.name} sent length-delimited`);
    } else r.fail(`field ${f.name} sent with wire type ${wire}`);
    if (f.repeated) ((out[f.name] ??= []) as unknown[]).push(value);
    else out[f.name] = value;
  }
  for (const f of Object.values(fields)) {
    if (out[f.name] === undefined || (!f.pointer && isZero(out[f.name]))) delete out[f.name];
  }
  return out;
}

function decodeFieldsV1(buf: Buffer): unknown {
  const r = new Reader(buf, "FieldsV1");
  let raw: Buffer | undefined;
  while (!r.done()) {
    const tag = Number(r.varint());
    if (tag === ((1 << 3) | 2)) raw = r.bytes();
    else r.fail(`unknown field tag ${tag}`);
  }
  if (!raw?.length) return undefined;
  try {
    return JSON.parse(raw.toString("utf8"));
  } catch {
    return r.fail("FieldsV1 is not JSON");
  }
}

function decodeMapEntry(buf: Buffer, valueType: "string" | "bytes", where: string) {
  const r = new Reader(buf, where);
  let key = "";
  let value = "";
  while (!r.done()) {
    const tag = Number(r.varint());
    if (tag === ((1 << 3) | 2)) key = r.bytes().toString("utf8");
    else if (tag === ((2 << 3) | 2)) {
      const raw = r.bytes();
      value = valueType === "bytes" ? raw.toString("base64") : raw.toString("utf8");
    } else r.fail(`unknown map entry tag ${tag}`);
  }
  return { key, value };
}

/** True when the body is in the protobuf encoding. */
export function isProtobuf(contentType: string | undefined): boolean {
  return (contentType ?? "").split(";")[0]!.trim() === protobufMediaType;
}

/** Decodes a protobuf request body into the JSON object it stands for (apiVersion and kind set). */
export function decodeProtobuf(body: Buffer): Record<string, unknown> {
  if (body.length < magic.length || !body.subarray(0, magic.length).equals(magic))
    throw errors.badRequest("error decoding request body: protobuf body does not start with the k8s magic");
  const envelope = decodeMessage("Unknown", body.subarray(magic.length));
  const typeMeta = (envelope.typeMeta ?? {}) as { apiVersion?: string; kind?: string };
  if (envelope.contentEncoding)
    throw errors.badRequest(
      `error decoding request body: content encoding ${String(envelope.contentEncoding)}`,
    );
  const key = `${typeMeta.apiVersion ?? ""}/${typeMeta.kind ?? ""}`;
  const root = rootMessages[key];
  if (!root)
    throw errors.unsupportedMediaType(
      `${protobufMediaType} (no protobuf decoding here for ${typeMeta.apiVersion} ${typeMeta.kind}; send JSON)`,
    );
  const raw = Buffer.from(String(envelope.raw ?? ""), "base64");
  const object = decodeMessage(root, raw);
  if (schema[root]![1]?.name === "metadata") object.metadata ??= {};
  return { apiVersion: typeMeta.apiVersion, kind: typeMeta.kind, ...object };
}
