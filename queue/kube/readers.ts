/**
 * Typed readers for our kinds: objects from the API server or an informer parsed with the zod
 * schemas the CRDs are generated from (queue/crds/), instead of cast. The few fields read of other
 * controllers' objects (Flux's, Argo CD's, Secrets) have schemas of their own here. The API server enforces the
 * same schema, so a failure means a version skew or a hand-edited object: the reader says which
 * field and skips the object, it never guesses.
 *
 * Code that reads a few fields of an object it does not otherwise parse (an uncached read at the
 * write, a tenant's object, a patch built from the object as read) reads each field on its own
 * (`fieldOf`): a field that does not fit its schema is absent, as a missing one is, and does not
 * hide the object's other fields.
 */
import { z } from "zod";
import {
  type ApplierGrant,
  type ArgoCDClaim,
  applierGrant,
  applierGrantSpec,
  approvalSpec,
  argoCDClaim,
  argoCDClaimSpec,
  type ClaimKind,
  type Condition,
  condition,
  type FluxClaim,
  fluxClaim,
  fluxClaimSpec,
  fluxClaimStatus,
  type GitProvider,
  type GitTarget,
  type GrantView,
  gitProvider,
  gitProviderSpec,
  gitTarget,
  gitTargetSpec,
  operation,
  operationTarget,
  type WebhookClaim,
  webhookClaim,
} from "../crds/index.js";
import type { Logger } from "../log.js";
import type { Informer } from "./informer.js";
import { type ClaimType, type KObject, objectKey, RESOURCES } from "./resources.js";

export type Claim = FluxClaim | ArgoCDClaim | WebhookClaim;

export type ReadResult<T> = { ok: true; value: T } | { ok: false; error: string };

/** Parses one object with a kind's schema; the error names each field that does not fit. */
export function readObject<S extends z.ZodTypeAny>(schema: S, obj: unknown): ReadResult<z.infer<S>> {
  const r = schema.safeParse(obj);
  if (r.success) return { ok: true, value: r.data };
  const error = r.error.issues.map((i) => `${i.path.join(".") || "(object)"}: ${i.message}`).join("; ");
  return { ok: false, error };
}

export const claimSchemaOf = (t: ClaimType) =>
  t.kind === RESOURCES.fluxClaim.kind
    ? fluxClaim
    : t.kind === RESOURCES.argoCDClaim.kind
      ? argoCDClaim
      : webhookClaim;

/** Parses of claims by object, per kind: an informer or a read hands a new object for every change. */
const claimReads = new Map<string, WeakMap<object, ReadResult<Claim>>>();

/** A claim of kind `t`, parsed (once per object). */
export function readClaim(t: ClaimType, obj: unknown): ReadResult<Claim> {
  if (typeof obj !== "object" || obj === null) return readObject(claimSchemaOf(t), obj) as ReadResult<Claim>;
  let reads = claimReads.get(t.kind);
  if (!reads) claimReads.set(t.kind, (reads = new WeakMap()));
  let r = reads.get(obj);
  if (!r) {
    r = readObject(claimSchemaOf(t), obj) as ReadResult<Claim>;
    reads.set(obj, r);
  }
  return r;
}
/** A claim of any of our kinds, by its `kind`, parsed (once per object). */
export function readAnyClaim(obj: { kind?: string } | undefined): ReadResult<Claim> {
  const t = [RESOURCES.fluxClaim, RESOURCES.argoCDClaim, RESOURCES.webhookClaim].find(
    (c) => c.kind === obj?.kind,
  );
  return t ? readClaim(t, obj) : { ok: false, error: `kind: not a claim (${obj?.kind ?? "none"})` };
}

/** The status of a claim of any of our kinds; undefined when it has none or does not fit its schema. */
export function claimStatusOf(obj: { kind?: string } | undefined): Claim["status"] | undefined {
  const r = readAnyClaim(obj);
  return r.ok ? r.value.status : undefined;
}

export const readFluxClaim = (obj: unknown) => readClaim(RESOURCES.fluxClaim, obj) as ReadResult<FluxClaim>;
export const readArgoCDClaim = (obj: unknown) =>
  readClaim(RESOURCES.argoCDClaim, obj) as ReadResult<ArgoCDClaim>;
export const readGitTarget = (obj: unknown): ReadResult<GitTarget> => readObject(gitTarget, obj);
export const readGitProvider = (obj: unknown): ReadResult<GitProvider> => readObject(gitProvider, obj);
export const readApplierGrant = (obj: unknown): ReadResult<ApplierGrant> => readObject(applierGrant, obj);

/**
 * An informer's objects, parsed: each cached object is parsed once (the informer replaces an object
 * on every change, so the parse is remembered by object) and one that does not fit its schema is
 * logged once and left out.
 */
export class TypedCache<T> {
  private readonly parsed = new WeakMap<object, ReadResult<T>>();

  constructor(
    private readonly informer: Pick<Informer<KObject>, "list" | "get">,
    private readonly read: (obj: unknown) => ReadResult<T>,
    private readonly log?: Logger,
  ) {}

  list(namespace?: string): T[] {
    const out: T[] = [];
    for (const o of this.informer.list(namespace)) {
      const r = this.of(o);
      if (r.ok) out.push(r.value);
    }
    return out;
  }

  get(name: string, namespace?: string): T | undefined {
    const o = this.informer.get(name, namespace);
    if (!o) return undefined;
    const r = this.of(o);
    return r.ok ? r.value : undefined;
  }

  /** The parse of one object (cached or read through the API). */
  of(o: KObject): ReadResult<T> {
    let r = this.parsed.get(o);
    if (!r) {
      r = this.read(o);
      this.parsed.set(o, r);
      if (!r.ok)
        this.log?.warn(
          {
            object: `${o.kind ?? ""} ${objectKey(o)}`,
            resourceVersion: o.metadata.resourceVersion,
            err: r.error,
          },
          "object does not fit its schema; left out",
        );
    }
    return r;
  }
}

/** Whether `v` is a JSON object (what an object's spec, status and metadata are made of). */
export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The identity fields code reads of any object without a reader: the rest is read through readers. */
const objectIdentity = z.object({
  apiVersion: z.string().optional(),
  kind: z.string().optional(),
  metadata: z.object({
    name: z.string(),
    namespace: z.string().optional(),
    uid: z.string().optional(),
    resourceVersion: z.string().optional(),
  }),
});

/**
 * Whether `v` is an object as the API server would return it, as far as its identity goes: for
 * objects no API server checked (a YAML file's documents).
 */
export function isKObject(v: unknown): v is KObject {
  return objectIdentity.safeParse(v).success;
}

/** Whether `v` fits `schema` as it is. */
function fits<S extends z.ZodTypeAny>(schema: S, v: unknown): v is z.input<S> {
  return schema.safeParse(v).success;
}

/**
 * The field `key` of a part of an object (its spec, status or metadata, or a part of those), read
 * with the field's schema in `schema`: the value as stored (nothing stripped, defaulted or
 * reordered, so what is compared or written back is what was read), or undefined when the part or
 * the field is absent or the field does not fit.
 */
export function fieldOf<Shape extends z.ZodRawShape, K extends keyof Shape & string>(
  schema: z.ZodObject<Shape>,
  part: unknown,
  key: K,
): z.input<Shape[K]> | undefined {
  const field: Shape[K] | undefined = schema.shape[key];
  const v = isRecord(part) ? part[key] : undefined;
  return field !== undefined && v !== undefined && fits(field, v) ? v : undefined;
}

/** The fields `keys` of a part that fit their schemas, each read on its own (`fieldOf`); the others absent. */
export function fieldsOf<Shape extends z.ZodRawShape, K extends keyof Shape & string>(
  schema: z.ZodObject<Shape>,
  part: unknown,
  keys: readonly K[],
): { [P in K]?: z.input<Shape[P]> } {
  const out: { [P in K]?: z.input<Shape[P]> } = {};
  for (const key of keys) {
    const v = fieldOf(schema, part, key);
    if (v !== undefined) out[key] = v;
  }
  return out;
}

/** The field `key` of a part, unread: a part whose own fields are read one at a time (`fieldOf`). */
export function partOf<Shape extends z.ZodRawShape>(
  _schema: z.ZodObject<Shape>,
  part: unknown,
  key: keyof Shape & string,
): unknown {
  return isRecord(part) ? part[key] : undefined;
}

/** The fields of a GitTarget's spec. */
export const targetSpecFields = gitTargetSpec;
/** The fields of a GitProvider's spec (its checks across fields are the API server's to hold). */
export const providerSpecFields = gitProviderSpec.innerType().innerType();
/** The fields of an Approval's spec. */
export const approvalSpecFields = approvalSpec.innerType();
/** The spec fields every claim kind has. */
export const claimSpecFields = fluxClaimSpec.pick({ accessFrom: true });
/** The status fields every claim kind has (all but previousSuspendState, whose values are per kind). */
export const claimStatusFields = fluxClaimStatus.omit({ previousSuspendState: true });

/** A reader of one field of an object's spec, by the spec's fields (`fieldOf`). */
export function specFieldReader<Shape extends z.ZodRawShape>(fields: z.ZodObject<Shape>) {
  return <K extends keyof Shape & string>(o: { spec?: unknown } | undefined, key: K) =>
    fieldOf(fields, o?.spec, key);
}

/** A reader of one field of an object's status, by the status's fields (`fieldOf`). */
export function statusFieldReader<Shape extends z.ZodRawShape>(fields: z.ZodObject<Shape>) {
  return <K extends keyof Shape & string>(o: { status?: unknown } | undefined, key: K) =>
    fieldOf(fields, o?.status, key);
}

/** A field of a GitTarget's spec. */
export const targetField = specFieldReader(targetSpecFields);

/** A field of a claim's status, of any claim kind. */
export const claimStatusField = statusFieldReader(claimStatusFields);

/**
 * The operation a claim's status records, each field read on its own: undefined unless its token,
 * phase and commit fit; a target that does not fit is left out, as is a requestedAt that does not.
 */
export function claimOperationOf(claim: { status?: unknown } | undefined) {
  const op = partOf(claimStatusFields, claim?.status, "operation");
  const token = fieldOf(operation, op, "token");
  const phase = fieldOf(operation, op, "phase");
  const commit = fieldOf(operation, op, "commit");
  if (token === undefined || phase === undefined || commit === undefined) return undefined;
  const targets = partOf(operation, op, "targets");
  const requestedAt = fieldOf(operation, op, "requestedAt");
  return {
    token,
    phase,
    commit,
    targets: (Array.isArray(targets) ? targets : []).flatMap((t) =>
      fits(operationTarget, t) ? [{ uid: t.uid, reason: t.reason }] : [],
    ),
    ...(requestedAt !== undefined ? { requestedAt } : {}),
  };
}

/** A condition as its writer stored it: read for its `type` only, the rest kept as it is. */
const storedCondition = condition.pick({ type: true }).passthrough();
export type StoredCondition = z.input<typeof storedCondition>;
const storedConditions = z.object({ conditions: z.array(storedCondition) });

/**
 * An object's conditions as stored, for a writer that sets its own and writes the list back whole:
 * each read for its `type` only, so the other writers' conditions are kept as they are.
 */
export function storedConditionsOf(o: { status?: unknown } | undefined): StoredCondition[] | undefined {
  return fieldOf(storedConditions, o?.status, "conditions");
}

/** The condition of `type` in a stored list, read whole; undefined when there is none or it does not fit. */
export function conditionIn(
  list: readonly StoredCondition[] | undefined,
  type: string,
): Condition | undefined {
  const c = list?.find((x) => x.type === type);
  return c !== undefined && fits(condition, c) ? c : undefined;
}

/** Applier references, read with the namespace optional: readers take a missing one to be the claim's. */
const kustomizationRef = fluxClaimSpec.shape.kustomizationRef.partial({ namespace: true });
const applicationRef = argoCDClaimSpec.shape.applicationRef.partial({ namespace: true });

/** The applier a Flux or Argo CD claim names (`spec.kustomizationRef`, `spec.applicationRef`). */
export function applierRefOf(
  kind: ClaimKind | (string & {}),
  claim: { spec?: unknown },
): z.input<typeof kustomizationRef> | undefined {
  const ref =
    kind === RESOURCES.fluxClaim.kind
      ? partOf(fluxClaimSpec, claim.spec, "kustomizationRef")
      : kind === RESOURCES.argoCDClaim.kind
        ? partOf(argoCDClaimSpec, claim.spec, "applicationRef")
        : undefined;
  return ref !== undefined && fits(kind === RESOURCES.fluxClaim.kind ? kustomizationRef : applicationRef, ref)
    ? ref
    : undefined;
}

/**
 * An ApplierGrant as the grant rule reads it. Its spec is read whole: a spec that does not fit
 * grants nothing (a `to` that does not fit must not read as absent, which grants every applier).
 */
export function grantViewOf(
  g: { metadata: { namespace?: string | undefined }; spec?: unknown },
  namespace: string,
): GrantView {
  const spec = g.spec;
  return {
    namespace: g.metadata.namespace ?? namespace,
    ...(fits(applierGrantSpec, spec) ? { spec } : {}),
  };
}

/*
 * Other controllers' objects (Flux's, Argo CD's, Secrets) have no schema of ours: the fields the
 * worker and the sidecar read of them are described here, each read on its own as ours are.
 */

/** A name, a URL or a reference in another controller's object: read only as a non-empty string. */
const given = z.string().min(1);
/** A list read for its strings: entries of another type are left out, not the list. */
const strings = z.array(z.unknown());

/** The strings of a list read with `strings` (none when it is absent). */
export const stringsIn = (list: readonly unknown[] | undefined): string[] =>
  (list ?? []).filter((x): x is string => typeof x === "string");

/** The fields of a Flux Kustomization's `spec.sourceRef` (Flux's CrossNamespaceSourceReference). */
export const sourceRefFields = z.object({ kind: given, name: given, namespace: given });
/** The fields of a Flux Kustomization's spec the worker reads. */
export const kustomizationSpecFields = z.object({ sourceRef: sourceRefFields });

/**
 * What a caller makes of a `spec.sourceRef` without a kind. Flux does not default it: its v1 API
 * requires the kind (CrossNamespaceSourceReference, `+required`: the API server refuses a
 * Kustomization without one) and kustomize-controller's getSource reads no source for a kind it
 * does not know ("source kind not supported"). So a kind-less reference, only possible where no API
 * server checked the object, names no source Flux reads:
 * - "none": it names no source (what Flux does; for a caller that reads or stamps the source);
 * - "GitRepository": it reads as a GitRepository (for a caller that only groups appliers by their
 *   source, where a group too wide only orders more, never less).
 */
export type MissingSourceKind = "none" | "GitRepository";

/**
 * The source a Kustomization reads (`spec.sourceRef`), its namespace the Kustomization's when not
 * given (empty is not given, as for Flux; "default" for a YAML document without one); undefined
 * when it names none: no name, or no kind and `missingKind` "none".
 */
export function kustomizationSourceOf(
  ks: { metadata: { namespace?: string | undefined }; spec?: unknown } | undefined,
  missingKind: MissingSourceKind,
): { kind: string; name: string; namespace: string } | undefined {
  const ref = partOf(kustomizationSpecFields, ks?.spec, "sourceRef");
  const { kind, name, namespace } = fieldsOf(sourceRefFields, ref, ["kind", "name", "namespace"]);
  if (name === undefined) return undefined;
  const k = kind ?? (missingKind === "GitRepository" ? missingKind : undefined);
  if (k === undefined) return undefined;
  return { kind: k, name, namespace: namespace ?? ks?.metadata.namespace ?? "default" };
}

/** The fields of a Flux Kustomization's or GitRepository's spec the sidecar reads. */
export const fluxSpecFields = z.object({ suspend: z.boolean(), url: given, ref: z.record(z.unknown()) });
/** The fields of a GitRepository's `spec.ref`: a branch, or what pins it elsewhere. */
export const gitRepositoryRefFields = z.object({
  branch: given,
  tag: given,
  semver: given,
  name: given,
  commit: given,
});
/** The fields of a Flux Kustomization's or GitRepository's status the sidecar reads. */
export const fluxStatusFields = z.object({
  lastHandledReconcileAt: z.string(),
  lastAppliedRevision: given,
  conditions: z.array(z.unknown()),
  history: z.array(z.unknown()),
  inventory: z.record(z.unknown()),
  artifact: z.record(z.unknown()),
});
/** The fields of a Flux condition (a metav1.Condition) the sidecar reads. */
export const fluxConditionFields = z.object({
  type: z.string(),
  status: z.enum(["True", "False", "Unknown"]),
  reason: z.string(),
  message: z.string(),
  lastTransitionTime: z.string(),
});
/** The fields of a Kustomization's `status.history` entry (kustomize-controller v1.7+). */
export const fluxHistoryFields = z.object({
  digest: z.string(),
  lastReconciled: z.string(),
  lastReconciledStatus: z.string(),
  totalReconciliations: z.number(),
});
/** One entry of a Kustomization's `status.inventory.entries`: an object's id and its version. */
const inventoryEntry = z.object({ id: z.string(), v: z.string() });

/** A field of a Flux object's spec. */
export const fluxSpecField = specFieldReader(fluxSpecFields);

/** A field of a Flux object's status. */
export const fluxStatusField = statusFieldReader(fluxStatusFields);

/** Whether a Flux object's `spec.suspend` is true. */
export const fluxSuspended = (o: { spec?: unknown } | undefined): boolean =>
  fluxSpecField(o, "suspend") === true;

/**
 * A Flux object's Ready condition, each field read on its own (one that does not fit is absent);
 * undefined when the object has none.
 */
export function fluxReadyOf(o: { status?: unknown } | undefined) {
  const ready = fluxStatusField(o, "conditions")?.find(
    (c) => fieldOf(fluxConditionFields, c, "type") === "Ready",
  );
  return ready === undefined
    ? undefined
    : fieldsOf(fluxConditionFields, ready, ["status", "reason", "message", "lastTransitionTime"]);
}

/** The newest entry of a Kustomization's `status.history`, each field read on its own. */
export function fluxHistoryHeadOf(ks: { status?: unknown } | undefined) {
  const head = fluxStatusField(ks, "history")?.[0];
  return isRecord(head)
    ? fieldsOf(fluxHistoryFields, head, [
        "digest",
        "lastReconciledStatus",
        "totalReconciliations",
        "lastReconciled",
      ])
    : undefined;
}

/** The objects a Kustomization's `status.inventory` lists, entry by entry. */
export function inventoryEntriesOf(ks: { status?: unknown } | undefined): { id: string; v: string }[] {
  const entries = partOf(fluxStatusFields, ks?.status, "inventory");
  const list = isRecord(entries) ? entries.entries : undefined;
  return (Array.isArray(list) ? list : []).flatMap((e) =>
    fits(inventoryEntry, e) ? [{ id: e.id, v: e.v }] : [],
  );
}

/** The revision a GitRepository's artifact holds (`status.artifact.revision`). */
export function artifactRevisionOf(src: { status?: unknown } | undefined): string | undefined {
  return fieldOf(z.object({ revision: given }), fluxStatusField(src, "artifact"), "revision");
}

/** A GitRepository's `spec.ref`: the fields of it that are given. */
export function gitRepositoryRefOf(src: { spec?: unknown } | undefined) {
  return fieldsOf(gitRepositoryRefFields, fluxSpecField(src, "ref"), [
    "branch",
    "tag",
    "semver",
    "name",
    "commit",
  ]);
}

/** The fields of a managedFields entry read here. */
export const managedFieldsEntryFields = z.object({
  manager: given,
  operation: z.string(),
  subresource: z.string(),
  fieldsV1: z.record(z.unknown()),
});

/** Whether a managedFields field set (`fieldsV1`) holds the field at `path` (`spec`, `suspend`). */
export function fieldSetHolds(fieldsV1: unknown, path: readonly string[]): boolean {
  let set = fieldsV1;
  for (const [i, name] of path.entries()) {
    if (!isRecord(set) || !(`f:${name}` in set)) return false;
    if (i < path.length - 1) set = set[`f:${name}`];
  }
  return path.length > 0;
}

/**
 * The managers that hold the field at `path` of an object (its main resource, not a subresource)
 * by server-side apply: managedFields entries of operation Apply, each read on its own; undefined
 * for an entry that names no manager.
 */
export function fieldAppliers(
  o: { metadata: { managedFields?: unknown } } | undefined,
  path: readonly string[],
): (string | undefined)[] {
  const entries = o?.metadata.managedFields;
  return (Array.isArray(entries) ? entries : []).flatMap((e) => {
    const f = fieldsOf(managedFieldsEntryFields, e, ["manager", "operation", "subresource", "fieldsV1"]);
    return f.operation === "Apply" && !f.subresource && fieldSetHolds(f.fieldsV1, path) ? [f.manager] : [];
  });
}

/** The fields of an Argo CD Application's source the worker and the sidecar read. */
export const applicationSourceFields = z.object({ repoURL: given, targetRevision: z.string() });
/** The fields of an Argo CD Application's `spec.destination`. */
export const destinationFields = z.object({ namespace: given, server: given, name: given });
/** The fields of an Argo CD Application's spec the worker reads. */
export const applicationSpecFields = z.object({
  source: applicationSourceFields,
  sources: z.array(applicationSourceFields),
  sourceHydrator: z.unknown(),
  project: given,
  destination: destinationFields,
  syncPolicy: z.record(z.unknown()),
});

/**
 * The repository an Application reads: its `spec.source`'s repoURL, or (no source object) that of
 * the first of its `spec.sources`.
 */
export function applicationRepoOf(app: { spec?: unknown } | undefined): string | undefined {
  const source = partOf(applicationSpecFields, app?.spec, "source");
  const sources = partOf(applicationSpecFields, app?.spec, "sources");
  const first = isRecord(source) ? source : Array.isArray(sources) ? sources[0] : undefined;
  return fieldOf(applicationSourceFields, first, "repoURL");
}

/** Where an Application deploys (`spec.destination`): the fields of it that are given. */
export function applicationDestinationOf(app: { spec?: unknown } | undefined): {
  namespace?: string;
  server?: string;
  name?: string;
} {
  const d = partOf(applicationSpecFields, app?.spec, "destination");
  return fieldsOf(destinationFields, d, ["namespace", "server", "name"]);
}

/** The fields of an Application's (or an ApplicationSet template's) `spec.syncPolicy` the sidecar reads. */
export const syncPolicyFields = z.object({
  automated: z.record(z.unknown()).nullable(),
  syncOptions: strings,
  retry: z.record(z.unknown()),
});
/** The fields of `spec.syncPolicy.automated`: Argo CD's switch (`enabled`) and its options. */
export const automatedFields = z.object({
  enabled: z.boolean().nullable(),
  prune: z.boolean(),
  selfHeal: z.boolean(),
  allowEmpty: z.boolean(),
});
/** The fields of an Argo CD operation (`operation`, or the one its state copies) the sidecar reads. */
export const argoOperationFields = z.object({
  sync: z.record(z.unknown()),
  initiatedBy: z.record(z.unknown()),
  info: z.array(z.unknown()),
  retry: z.record(z.unknown()),
});
const syncOperationFields = z.object({ revision: z.string() });
const initiatedByFields = z.object({ username: z.string(), automated: z.boolean() });
const infoEntry = z.object({ name: z.string(), value: z.string() });
const retryFields = z.object({ limit: z.number(), backoff: z.record(z.unknown()) });
const backoffFields = z.object({ duration: z.string(), factor: z.number(), maxDuration: z.string() });
/** The fields of an Application's `status.operationState` the sidecar reads. */
export const operationStateFields = z.object({
  operation: z.record(z.unknown()),
  phase: z.string(),
  message: z.string(),
  syncResult: z.record(z.unknown()),
  startedAt: z.string(),
  finishedAt: z.string(),
  retryCount: z.number(),
});

/** The fields of an ApplicationSet's spec the sidecar reads: the template of its Applications. */
export const applicationSetSpecFields = z.object({ template: z.record(z.unknown()) });

/** The `syncPolicy.automated` of an Application's (or an ApplicationSet template's) spec; undefined when absent or null. */
export function applicationAutomatedOf(o: { spec?: unknown } | undefined) {
  const a = fieldOf(syncPolicyFields, fieldOf(applicationSpecFields, o?.spec, "syncPolicy"), "automated");
  return a ? fieldsOf(automatedFields, a, ["enabled", "prune", "selfHeal", "allowEmpty"]) : undefined;
}

/** An Argo CD operation, each field read on its own; undefined when it is not an object. */
export function argoOperationOf(op: unknown) {
  if (!isRecord(op)) return undefined;
  const f = fieldsOf(argoOperationFields, op, ["sync", "initiatedBy", "info", "retry"]);
  const backoff = f.retry && fieldOf(retryFields, f.retry, "backoff");
  const retry = f.retry && {
    ...fieldsOf(retryFields, f.retry, ["limit"]),
    ...(backoff ? { backoff: fieldsOf(backoffFields, backoff, ["duration", "factor", "maxDuration"]) } : {}),
  };
  return {
    ...(f.sync ? { sync: fieldsOf(syncOperationFields, f.sync, ["revision"]) } : {}),
    ...(f.initiatedBy
      ? { initiatedBy: fieldsOf(initiatedByFields, f.initiatedBy, ["username", "automated"]) }
      : {}),
    info: (f.info ?? []).flatMap((i) => (fits(infoEntry, i) ? [{ name: i.name, value: i.value }] : [])),
    ...(retry ? { retry } : {}),
  };
}
export type ArgoOperationView = NonNullable<ReturnType<typeof argoOperationOf>>;

/** An Application's `operation` (the one asked for), read with `argoOperationOf`. */
export const applicationOperationOf = (app: KObject | undefined) => argoOperationOf(app?.operation);

/** An Application's `status.operationState`, each field read on its own; undefined when absent. */
export function operationStateOf(app: { status?: unknown } | undefined) {
  const state = isRecord(app?.status) ? app.status.operationState : undefined;
  if (!isRecord(state)) return undefined;
  const f = fieldsOf(operationStateFields, state, [
    "phase",
    "message",
    "startedAt",
    "finishedAt",
    "retryCount",
  ]);
  const operation = argoOperationOf(state.operation);
  const syncResult = fieldOf(operationStateFields, state, "syncResult");
  return {
    ...f,
    ...(operation ? { operation } : {}),
    ...(syncResult ? { syncResult: fieldsOf(syncOperationFields, syncResult, ["revision"]) } : {}),
  };
}
export type OperationStateView = NonNullable<ReturnType<typeof operationStateOf>>;

/** The fields of one entry of an AppProject's `spec.syncWindows` (schedule and duration may be empty). */
export const syncWindowFields = z.object({
  kind: given,
  schedule: z.string(),
  duration: z.string(),
  applications: strings,
  namespaces: strings,
  clusters: strings,
  manualSync: z.boolean(),
  andOperator: z.boolean(),
  timeZone: given,
});
/** The fields of an AppProject's spec the worker reads: its sync windows, each read on its own. */
export const appProjectSpecFields = z.object({ syncWindows: z.array(z.unknown()) });

/** The fields of a Secret the worker reads: `data` (base64) and `stringData` (plain). */
export const secretFields = z.object({ data: z.record(z.string()), stringData: z.record(z.string()) });
