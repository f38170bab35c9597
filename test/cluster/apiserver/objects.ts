/**
 * The life of an object: create, read, update, the four patch kinds, server-side apply, delete
 * with finalizers and propagation, generation, status subresource and managedFields. The HTTP
 * layer calls these; they throw ApiError for every refusal.
 */
import { randomUUID } from "node:crypto";
import { parse as parseYaml } from "yaml";
import { errorMessage } from "../../../queue/errors.js";
import { wireTime } from "../clock.js";
import { type AdmissionRequest, admit, type Operation } from "./admission.js";
import type { User } from "./auth.js";
import { clone } from "./clone.js";
import { defaultWorkload, zeroWorkload } from "./defaults.js";
import { errors } from "./errors.js";
import { deepEqual } from "./fieldset.js";
import { type Actor, ownersAfterScale, ownersAfterUpdate, serverSideApply, writeOwners } from "./managed.js";
import { jsonPatch, mergePatch, strategicMergePatch } from "./patch.js";
import type { Policy } from "./rbac.js";
import {
  type Registry,
  servedShape,
  storageKeyOf,
  storedShape,
  typeKeyOf,
  typesFromCrd,
  validateCrd,
} from "./registry.js";
import { requestedReplicas, scaleOf, withReplicas } from "./scale.js";
import { unknownFields } from "./schema.js";
import type { Store } from "./store.js";
import { apiVersionOf, type KObject, type ResourceType } from "./types.js";
import { schemaCauses } from "./validation.js";

export interface Target {
  type: ResourceType;
  namespace?: string;
  name?: string;
  subresource?: string;
}

export interface WriteOptions {
  fieldManager?: string;
  /** Strict | Warn | Ignore (server default Warn) */
  fieldValidation?: string;
  dryRun?: boolean;
  force?: boolean;
  userAgent?: string;
  user?: User;
}

export interface WriteResult {
  object: KObject;
  warnings: string[];
  created?: boolean;
  /** What the response carries instead of the object (a delete's Status). */
  response?: unknown;
}

export type PatchKind = "merge" | "json" | "strategic" | "apply";

const systemNamespaces = ["default", "kube-system", "kube-public", "kube-node-lease"];
const nameAlphabet = "bcdfghjklmnpqrstvwxz2456789";

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The manager an Update is recorded under: fieldManager, or the user agent's first word. */
export function managerName(opts: WriteOptions): string {
  if (opts.fieldManager) return opts.fieldManager;
  const ua = opts.userAgent?.split("/")[0]?.trim();
  return ua || "unknown";
}

function withoutVolatile(o: KObject): unknown {
  const c = clone(o);
  delete c.metadata.resourceVersion;
  c.metadata.managedFields = c.metadata.managedFields?.map((e) => ({ ...e, time: "" }));
  return c;
}

/**
 * Empty label, annotation, finalizer and owner lists are not kept: the server stores metadata
 * through its Go type, whose `omitempty` drops them (so `kubectl label x k-` leaves no `labels: {}`).
 */
function dropEmptyMetadata(o: KObject): void {
  const m = o.metadata as Record<string, unknown>;
  for (const k of ["labels", "annotations", "finalizers", "ownerReferences"]) {
    const v = m[k];
    if (v === null || (Array.isArray(v) && v.length === 0)) delete m[k];
    else if (isPlainObject(v) && Object.keys(v).length === 0) delete m[k];
  }
}

/** The part of an object that moves metadata.generation. */
function generationPart(type: ResourceType, o: KObject): unknown {
  const { metadata: _m, status, ...rest } = o;
  return type.statusSubresource ? rest : { ...rest, status };
}

export class Objects {
  /** The stored RBAC policy, for the escalation check of RBAC writes; set by the server. */
  rbacPolicy: (() => Policy) | undefined;

  constructor(
    private readonly store: Store,
    private readonly registry: Registry,
    private readonly now: () => number,
  ) {}

  /**
   * Admission of a write by a user (RBAC escalation, ValidatingAdmissionPolicies): throws the
   * refusal. Writes the server makes itself (no user: bootstrap, garbage collection) are admitted.
   */
  private admit(
    operation: Operation,
    target: Target,
    object: KObject | null,
    oldObject: KObject | null,
    opts: WriteOptions,
  ): void {
    const user = opts.user;
    if (!user || !this.rbacPolicy) return;
    const req: AdmissionRequest = {
      operation,
      type: target.type,
      ...(target.subresource ? { subresource: target.subresource } : {}),
      ...(target.namespace ? { namespace: target.namespace } : {}),
      name: (object ?? oldObject)?.metadata.name ?? target.name ?? "",
      object,
      oldObject,
      user,
      dryRun: opts.dryRun === true,
    };
    const stored = (plural: string) => {
      const t = this.registry.find("admissionregistration.k8s.io", "v1", plural);
      return t ? this.list(t) : [];
    };
    admit(
      {
        policy: this.rbacPolicy,
        policies: () => ({
          policies: stored("validatingadmissionpolicies"),
          bindings: stored("validatingadmissionpolicybindings"),
        }),
        namespace: (name) => this.store.get("/namespaces", undefined, name),
      },
      req,
    );
  }

  /** Creates the namespaces every cluster starts with. */
  bootstrap(): void {
    const ns = this.registry.find("", "v1", "namespaces")!;
    for (const name of systemNamespaces) {
      this.create(
        { type: ns },
        { apiVersion: "v1", kind: "Namespace", metadata: { name } },
        { fieldManager: "kube-apiserver" },
      );
    }
  }

  private key(t: ResourceType): string {
    return storageKeyOf(t);
  }

  /** A stored object as `t` serves it. */
  private present(t: ResourceType, stored: KObject): KObject {
    // Objects are stored once per group/resource; each served version shows its own apiVersion,
    // and a view of another resource (events.k8s.io Events) its own fields.
    return servedShape(t, stored);
  }

  /** An object already in `t`'s shape, with `t`'s apiVersion. */
  private served(t: ResourceType, o: KObject): KObject {
    o.apiVersion = apiVersionOf(t);
    return o;
  }

  /** Stores an object of `t`'s shape (converted where `t` is a view of another resource). */
  private put(t: ResourceType, o: KObject, previous: KObject | undefined): KObject {
    return this.store.put(this.key(t), storedShape(t, o), previous && storedShape(t, previous));
  }

  get(target: Target): KObject {
    const o = this.store.get(this.key(target.type), target.namespace, target.name!);
    if (!o) throw errors.notFound({ ...target.type, name: target.name! });
    return this.present(target.type, o);
  }

  list(type: ResourceType, namespace?: string): KObject[] {
    return this.store.list(this.key(type), namespace).map((o) => this.present(type, o));
  }

  private requireNamespace(type: ResourceType, namespace: string | undefined, creating: boolean): void {
    if (!type.namespaced) return;
    if (!namespace)
      throw errors.badRequest("the server could not find the requested resource: a namespace is required");
    const ns = this.store.get("/namespaces", undefined, namespace);
    if (!ns) throw errors.notFound({ group: "", plural: "namespaces", name: namespace });
    if (creating && ns.metadata.deletionTimestamp)
      throw Object.assign(
        errors.forbidden("system", "create", { group: type.group, plural: type.plural }, namespace),
        {
          message: `${type.plural} is forbidden: unable to create new content in namespace ${namespace} because it is being terminated`,
        },
      );
  }

  /** Unknown fields: refused under Strict, dropped with a warning otherwise (custom resources only). */
  private validate(type: ResourceType, o: KObject, opts: WriteOptions): string[] {
    if (!type.schema) return [];
    const mode = opts.fieldValidation ?? "Warn";
    if (mode === "Strict") {
      const unknown = unknownFields(clone(o), type.schema, false);
      if (unknown.length)
        throw errors.badRequest(
          `${type.kind} in version "${type.version}" cannot be handled as a ${type.kind}: strict decoding error: ${unknown
            .map((f) => `unknown field "${f.slice(1)}"`)
            .join(", ")}`,
        );
      return [];
    }
    const pruned = unknownFields(o, type.schema, true);
    return mode === "Ignore" ? [] : pruned.map((f) => `unknown field "${f.slice(1)}"`);
  }

  private checkBody(target: Target, o: unknown): asserts o is KObject {
    if (!isPlainObject(o) || !isPlainObject(o.metadata))
      throw errors.badRequest("the body must be a Kubernetes object with metadata");
    const t = target.type;
    if (o.kind !== undefined && o.kind !== t.kind)
      throw errors.badRequest(
        `the kind of the object (${String(o.kind)}) does not match the kind of the resource (${t.kind})`,
      );
    if (o.apiVersion !== undefined && o.apiVersion !== apiVersionOf(t))
      throw errors.badRequest(
        `the API version in the data (${String(o.apiVersion)}) does not match the expected API version (${apiVersionOf(t)})`,
      );
    const meta = o.metadata as KObject["metadata"];
    if (target.name && meta.name && meta.name !== target.name)
      throw errors.badRequest(
        `the name of the object (${meta.name}) does not match the name on the URL (${target.name})`,
      );
    if (t.namespaced && meta.namespace && target.namespace && meta.namespace !== target.namespace)
      throw errors.badRequest(
        "the namespace of the provided object does not match the namespace sent on the request",
      );
  }

  create(target: Target, body: unknown, opts: WriteOptions): WriteResult {
    const t = target.type;
    this.checkBody(target, body);
    const o = clone(body) as KObject;
    o.apiVersion = apiVersionOf(t);
    o.kind = t.kind;
    const meta = o.metadata;
    if (!meta.name) {
      if (!meta.generateName)
        throw errors.invalid({ group: t.group, plural: t.plural, kind: t.kind, name: "" }, [
          {
            field: "metadata.name",
            message: "Required value: name or generateName is required",
            reason: "FieldValueRequired",
          },
        ]);
      let suffix = "";
      for (let i = 0; i < 5; i++) suffix += nameAlphabet[Math.floor(Math.random() * nameAlphabet.length)];
      meta.name = meta.generateName + suffix;
    }
    if (!/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(meta.name) || meta.name.length > 253)
      throw errors.invalid({ group: t.group, plural: t.plural, kind: t.kind, name: meta.name }, [
        {
          field: "metadata.name",
          message: `Invalid value: "${meta.name}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'`,
        },
      ]);
    if (t.namespaced) meta.namespace = target.namespace;
    else delete meta.namespace;
    this.requireNamespace(t, meta.namespace, true);
    if (this.store.get(this.key(t), meta.namespace, meta.name))
      throw errors.alreadyExists({ ...t, name: meta.name });
    const warnings = this.validate(t, o, opts);
    if (t.statusSubresource && t.crdName) delete o.status;
    meta.uid = randomUUID();
    meta.creationTimestamp = wireTime(this.now());
    delete meta.deletionTimestamp;
    delete meta.deletionGracePeriodSeconds;
    delete meta.resourceVersion;
    if (t.hasGeneration) meta.generation = 1;
    else delete meta.generation;
    this.defaults(t, o);
    this.checkSchema(t, o);
    if (t.kind === "CustomResourceDefinition") this.prepareCrd(o);
    dropEmptyMetadata(o);
    this.admit("CREATE", target, o, null, opts);
    if (!meta.managedFields?.length) {
      const who = this.actor(t, target, opts);
      meta.managedFields = writeOwners(ownersAfterUpdate(t, undefined, o, who, this.zeroOf(t)));
    }
    if (opts.dryRun) return { object: o, warnings, created: true };
    const stored = this.put(t, o, undefined);
    this.afterWrite(t, stored);
    return { object: this.present(t, stored), warnings, created: true };
  }

  /** A custom resource must satisfy its CRD's schema and CEL rules (422 Invalid naming each field). */
  private checkSchema(t: ResourceType, o: KObject, old?: KObject): void {
    if (!t.schema || !t.crdName) return;
    const causes = schemaCauses(t.schema, o, old);
    if (causes.length)
      throw errors.invalid(
        { group: t.group, plural: t.plural, kind: t.kind, name: o.metadata.name ?? "" },
        causes,
      );
  }

  /** A kind's empty object as its Go type writes it: what a create changed, for ownership. */
  private zeroOf(t: ResourceType): object {
    if (t.encode) return t.encode({ apiVersion: "", kind: "", metadata: {} });
    return zeroWorkload(t.group, t.kind);
  }

  private actor(t: ResourceType, target: Target, opts: WriteOptions): Actor {
    return {
      manager: managerName(opts),
      apiVersion: apiVersionOf(t),
      time: wireTime(this.now()),
      ...(target.subresource ? { subresource: target.subresource } : {}),
    };
  }

  private defaults(t: ResourceType, o: KObject): void {
    if (t.kind === "Namespace" && t.group === "") {
      o.spec = { finalizers: ["kubernetes"] };
      o.status = { phase: "Active" };
      o.metadata.labels = { ...o.metadata.labels, "kubernetes.io/metadata.name": o.metadata.name! };
    }
    if (t.kind === "Secret" && t.group === "" && !o.type) o.type = "Opaque";
    this.foldStringData(t, o);
    if (t.statusSubresource && !t.crdName && t.kind !== "Namespace") delete o.status; // a create sets no status
    defaultWorkload(t.group, t.kind, o);
  }

  private foldStringData(t: ResourceType, o: KObject): void {
    if (t.kind === "Secret" && t.group === "" && isPlainObject(o.stringData)) {
      // A copy: after a merge patch `o.data` may still be the stored object's own.
      const data = { ...(isPlainObject(o.data) ? o.data : {}) } as Record<string, string>;
      for (const [k, v] of Object.entries(o.stringData)) data[k] = Buffer.from(String(v)).toString("base64");
      o.data = data;
      delete o.stringData;
    }
  }

  private prepareCrd(o: KObject): void {
    validateCrd(o);
    const spec = o.spec as { names: Record<string, unknown> };
    const types = typesFromCrd(o);
    for (const t of types) {
      const clash = this.registry.find(t.group, t.version, t.plural);
      if (clash && clash.crdName !== o.metadata.name)
        throw errors.invalid(
          {
            group: "apiextensions.k8s.io",
            plural: "customresourcedefinitions",
            kind: "CustomResourceDefinition",
            name: o.metadata.name!,
          },
          [{ field: "spec.names.plural", message: "the resource is already served" }],
        );
    }
    const at = wireTime(this.now());
    o.status = {
      acceptedNames: spec.names,
      storedVersions: ((o.spec as { versions: { name: string; storage?: boolean }[] }).versions ?? [])
        .filter((v) => v.storage)
        .map((v) => v.name),
      conditions: [
        {
          type: "NamesAccepted",
          status: "True",
          reason: "NoConflicts",
          message: "no conflicts found",
          lastTransitionTime: at,
        },
        {
          type: "Established",
          status: "True",
          reason: "InitialNamesAccepted",
          message: "the initial names have been accepted",
          lastTransitionTime: at,
        },
      ],
    };
  }

  private afterWrite(t: ResourceType, stored: KObject): void {
    if (t.kind === "CustomResourceDefinition" && t.group === "apiextensions.k8s.io")
      this.registry.setCrd(stored);
  }

  private afterRemove(t: ResourceType, gone: KObject): void {
    if (t.kind === "CustomResourceDefinition" && t.group === "apiextensions.k8s.io") {
      for (const served of typesFromCrd(gone)) this.store.dropType(typeKeyOf(served));
      this.registry.removeCrd(gone.metadata.name!);
    }
    // Garbage collection (background): dependents of a removed owner go too.
    for (const dep of this.store.dependentsOf(gone.metadata.uid!)) {
      const type = this.typeOfKey(dep.typeKey);
      if (type) this.removeOrFinalize(type, dep.object, "Background");
    }
    // The namespace controller removes a terminating namespace once it is empty.
    const ns = gone.metadata.namespace;
    if (ns) this.finishNamespace(ns);
  }

  private typeOfKey(typeKey: string): ResourceType | undefined {
    return this.registry.all().find((t) => typeKeyOf(t) === typeKey);
  }

  private finishNamespace(name: string): void {
    const ns = this.store.get("/namespaces", undefined, name);
    if (!ns?.metadata.deletionTimestamp) return;
    if (this.store.inNamespace(name).length > 0) return;
    if (ns.metadata.finalizers?.length) return;
    const type = this.registry.find("", "v1", "namespaces")!;
    const gone = this.store.remove("/namespaces", ns);
    this.afterRemove(type, gone);
  }

  /**
   * Common end of every change to an existing object: server-owned fields restored, status
   * split, generation, managedFields, finalizer rules, then stored (unless nothing changed).
   */
  private commit(
    target: Target,
    old: KObject,
    next: KObject,
    opts: WriteOptions,
    owners?: ReturnType<typeof ownersAfterUpdate>,
  ): WriteResult {
    const t = target.type;
    // An update or patch folds stringData into data too, as the real API server does.
    this.foldStringData(t, next);
    let o = next;
    if (target.subresource === "status") {
      o = { ...clone(old), status: next.status };
      if (next.status === undefined) delete o.status;
    } else if (t.statusSubresource) {
      if (old.status === undefined) delete o.status;
      else o.status = clone(old.status);
    }
    const keep = [
      "uid",
      "creationTimestamp",
      "deletionTimestamp",
      "deletionGracePeriodSeconds",
      "generation",
      "name",
      "namespace",
    ] as const;
    for (const k of keep) {
      if (old.metadata[k] === undefined) delete o.metadata[k];
      else (o.metadata as Record<string, unknown>)[k] = old.metadata[k];
    }
    o.apiVersion = apiVersionOf(t);
    o.kind = t.kind;
    // Every write is defaulted as it is decoded, so a body that leaves a default out changes nothing.
    defaultWorkload(t.group, t.kind, o);
    if (t.kind === "CustomResourceDefinition") this.prepareCrd(o);
    dropEmptyMetadata(o);
    if (old.metadata.deletionTimestamp) {
      const added = (o.metadata.finalizers ?? []).filter((f) => !(old.metadata.finalizers ?? []).includes(f));
      if (added.length)
        throw errors.invalid({ group: t.group, plural: t.plural, kind: t.kind, name: old.metadata.name! }, [
          {
            field: "metadata.finalizers",
            message: `Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers ${JSON.stringify(added)}`,
          },
        ]);
    }
    if (t.hasGeneration && !deepEqual(generationPart(t, old), generationPart(t, o)))
      o.metadata.generation = (old.metadata.generation ?? 0) + 1;
    if (owners) o.metadata.managedFields = writeOwners(owners);
    else {
      const given = o.metadata.managedFields;
      const requestSetsOwners =
        given !== undefined && given.length > 0 && !deepEqual(given, old.metadata.managedFields);
      // A request may rewrite managedFields (e.g. to strip a manager); `[{}]` clears them.
      const base: KObject = requestSetsOwners
        ? { ...old, metadata: { ...old.metadata, managedFields: given.filter((e) => e?.manager) } }
        : old;
      o.metadata.managedFields = writeOwners(ownersAfterUpdate(t, base, o, this.actor(t, target, opts)));
    }
    // Admission sees an update that changes nothing too (the store then writes nothing).
    if (deepEqual(withoutVolatile(old), withoutVolatile(o))) {
      this.admit("UPDATE", target, o, old, opts);
      return { object: this.served(t, old), warnings: [] };
    }
    this.checkSchema(t, o, old);
    this.admit("UPDATE", target, o, old, opts);
    if (opts.dryRun) return { object: this.served(t, o), warnings: [] };
    if (o.metadata.deletionTimestamp && !o.metadata.finalizers?.length) {
      // The write that takes the last finalizer away deletes the object: watchers get DELETED with
      // the last stored state, the writer gets what it wrote, at the resourceVersion it replaced.
      const gone = this.store.remove(this.key(t), o);
      this.afterRemove(t, gone);
      o.metadata.resourceVersion = old.metadata.resourceVersion;
      return { object: this.served(t, o), warnings: [] };
    }
    const stored = this.put(t, o, old);
    this.afterWrite(t, stored);
    return { object: this.present(t, stored), warnings: [] };
  }

  private checkSubresource(target: Target): void {
    const sub = target.subresource;
    if (
      sub &&
      !(sub === "status" && target.type.statusSubresource) &&
      !(sub === "scale" && target.type.scale)
    )
      throw errors.notFound({ ...target.type, name: `${target.name}/${target.subresource}` });
  }

  /** GET …/scale */
  getScale(target: Target): KObject {
    this.checkSubresource(target);
    return scaleOf(target.type, this.get(target));
  }

  /** A write through …/scale changes only the replicas, recorded under subresource "scale". */
  private writeScale(target: Target, scale: unknown, opts: WriteOptions): WriteResult {
    const t = target.type;
    const old = this.get(target);
    const replicas = requestedReplicas(scale, target.name!);
    const rv = (scale as { metadata?: { resourceVersion?: string } }).metadata?.resourceVersion;
    this.precondition(target, old, rv);
    const next = withReplicas(t, old, replicas);
    const owners = ownersAfterScale(t, old, next, this.actor(t, target, opts));
    const r = this.commit(target, old, next, opts, owners);
    return { ...r, object: scaleOf(t, r.object) };
  }

  private precondition(target: Target, current: KObject, rv: string | undefined): void {
    if (rv !== undefined && rv !== "" && rv !== current.metadata.resourceVersion)
      throw errors.conflict(
        { ...target.type, name: target.name! },
        "the object has been modified; please apply your changes to the latest version and try again",
      );
  }

  update(target: Target, body: unknown, opts: WriteOptions): WriteResult {
    this.checkSubresource(target);
    if (target.subresource === "scale") return this.writeScale(target, body, opts);
    this.checkBody(target, body);
    const t = target.type;
    const old = this.get(target);
    const next = clone(body) as KObject;
    const rv = next.metadata.resourceVersion;
    if (t.crdName && !rv)
      throw errors.invalid({ group: t.group, plural: t.plural, kind: t.kind, name: target.name! }, [
        { field: "metadata.resourceVersion", message: "Invalid value: 0x0: must be specified for an update" },
      ]);
    this.precondition(target, old, rv);
    const warnings = this.validate(t, next, opts);
    const r = this.commit(target, old, next, opts);
    return { ...r, warnings: [...warnings, ...r.warnings] };
  }

  patch(target: Target, kind: PatchKind, raw: string, opts: WriteOptions): WriteResult {
    this.checkSubresource(target);
    if (kind === "apply" && target.subresource === "scale")
      throw errors.unsupportedMediaType(
        "application/apply-patch+yaml (not served on the scale subresource here)",
      );
    if (kind === "apply") return this.apply(target, raw, opts);
    let patch: unknown;
    try {
      patch = JSON.parse(raw);
    } catch (e) {
      throw errors.badRequest(`error decoding patch: ${errorMessage(e)}`);
    }
    if (target.subresource === "scale") {
      const current = this.getScale(target);
      const next =
        kind === "merge"
          ? mergePatch(current, patch)
          : kind === "json"
            ? jsonPatch(current, patch)
            : strategicMergePatch(current, patch);
      return this.writeScale(target, next, opts);
    }
    const old = this.get(target);
    if (kind === "strategic" && target.type.crdName)
      throw errors.unsupportedMediaType(
        "application/strategic-merge-patch+json (not supported for custom resources)",
      );
    const next = (
      kind === "merge"
        ? mergePatch(old, patch)
        : kind === "json"
          ? jsonPatch(old, patch)
          : strategicMergePatch(old, patch)
    ) as KObject;
    this.checkBody(target, next);
    this.precondition(target, old, next.metadata.resourceVersion);
    const warnings = this.validate(target.type, next, opts);
    const r = this.commit(target, old, next, opts);
    return { ...r, warnings: [...warnings, ...r.warnings] };
  }

  private apply(target: Target, raw: string, opts: WriteOptions): WriteResult {
    const t = target.type;
    if (!opts.fieldManager)
      throw errors.badRequest(
        "PATCH requests using server-side apply must specify fieldManager (fieldManager is required for apply requests)",
      );
    let applied: unknown;
    try {
      applied = parseYaml(raw);
    } catch (e) {
      throw errors.badRequest(`error decoding YAML: ${errorMessage(e)}`);
    }
    if (!isPlainObject(applied) || !applied.apiVersion || !applied.kind)
      throw errors.badRequest("apply configurations must set apiVersion and kind");
    if (!isPlainObject(applied.metadata)) applied.metadata = {};
    this.checkBody(target, applied);
    const cfg = applied as KObject;
    if (!cfg.metadata.name) cfg.metadata.name = target.name;
    if (t.namespaced) cfg.metadata.namespace = target.namespace;
    const warnings = this.validate(t, cfg, opts);
    const rv = cfg.metadata.resourceVersion;
    delete cfg.metadata.resourceVersion;
    for (const k of ["uid", "creationTimestamp", "generation", "managedFields", "deletionTimestamp"])
      delete cfg.metadata[k];
    const scoped: KObject =
      target.subresource === "status"
        ? {
            apiVersion: cfg.apiVersion,
            kind: cfg.kind,
            metadata: { name: cfg.metadata.name, namespace: cfg.metadata.namespace },
            status: cfg.status,
          }
        : cfg;
    if (target.subresource !== "status" && t.statusSubresource) delete scoped.status;
    const who = { ...this.actor(t, target, opts), manager: opts.fieldManager };
    const live = this.store.get(this.key(t), target.namespace, target.name!);
    if (!live) {
      if (target.subresource) throw errors.notFound({ ...t, name: target.name! });
      if (rv) throw errors.notFound({ ...t, name: target.name! });
      const { object, owners } = serverSideApply(t, undefined, scoped, who, !!opts.force);
      object.metadata.managedFields = writeOwners(owners);
      const r = this.create({ ...target, subresource: undefined }, object, {
        ...opts,
        fieldValidation: "Ignore",
      });
      return { ...r, warnings };
    }
    const current = this.present(t, live);
    this.precondition(target, current, rv);
    const { object, owners } = serverSideApply(t, current, scoped, who, !!opts.force);
    const r = this.commit(target, current, object, opts, owners);
    return { ...r, warnings: [...warnings, ...r.warnings] };
  }

  delete(target: Target, body: unknown, opts: WriteOptions & { propagationPolicy?: string }): WriteResult {
    const t = target.type;
    const current = this.get(target);
    const options = (isPlainObject(body) ? body : {}) as {
      preconditions?: { uid?: string; resourceVersion?: string };
      propagationPolicy?: string;
      dryRun?: string[];
    };
    const pre = options.preconditions ?? {};
    if (pre.uid && pre.uid !== current.metadata.uid)
      throw errors.conflict(
        { ...t, name: target.name! },
        `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${current.metadata.uid}`,
      );
    if (pre.resourceVersion && pre.resourceVersion !== current.metadata.resourceVersion)
      throw errors.conflict(
        { ...t, name: target.name! },
        `Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ResourceVersion in object meta: ${current.metadata.resourceVersion}`,
      );
    const dryRun = opts.dryRun || options.dryRun?.includes("All");
    this.admit("DELETE", target, null, current, { ...opts, dryRun: dryRun === true });
    if (dryRun) return { object: current, warnings: [] };
    const policy = options.propagationPolicy ?? opts.propagationPolicy ?? "Background";
    const out = this.present(t, this.removeOrFinalize(t, current, policy));
    const removed = !this.store.get(this.key(t), target.namespace, target.name!);
    // Built-in kinds answer a finished delete with a Success Status; custom resources (and
    // anything still held by finalizers) with the object.
    if (removed && !t.crdName && t.group !== "apiextensions.k8s.io")
      return {
        object: out,
        warnings: [],
        response: {
          kind: "Status",
          apiVersion: "v1",
          metadata: {},
          status: "Success",
          // details.group is omitempty: the core group's "" is left out.
          details: {
            name: target.name,
            ...(t.group ? { group: t.group } : {}),
            kind: t.plural,
            uid: current.metadata.uid,
          },
        },
      };
    return { object: out, warnings: [] };
  }

  /** Deletes now, or marks for deletion while finalizers remain. */
  private removeOrFinalize(t: ResourceType, current: KObject, policy: string): KObject {
    if (policy === "Orphan") {
      for (const dep of this.store.dependentsOf(current.metadata.uid!)) {
        const o = dep.object;
        o.metadata.ownerReferences = o.metadata.ownerReferences?.filter(
          (r) => r.uid !== current.metadata.uid,
        );
        if (!o.metadata.ownerReferences?.length) delete o.metadata.ownerReferences;
        this.store.put(dep.typeKey, o, dep.object);
      }
    }
    if (current.metadata.deletionTimestamp) return storedShape(t, current);
    const isNamespace = t.group === "" && t.kind === "Namespace";
    if (current.metadata.finalizers?.length || isNamespace) {
      const o = clone(current);
      o.metadata.deletionTimestamp = wireTime(this.now());
      o.metadata.deletionGracePeriodSeconds = 0;
      if (t.hasGeneration) o.metadata.generation = (o.metadata.generation ?? 0) + 1;
      if (isNamespace) o.status = { ...(o.status as object), phase: "Terminating" };
      const stored = this.put(t, o, current);
      if (isNamespace) {
        for (const item of this.store.inNamespace(current.metadata.name!)) {
          const type = this.typeOfKey(item.typeKey);
          if (type) this.removeOrFinalize(type, item.object, "Background");
        }
        this.finishNamespace(current.metadata.name!);
        return this.store.get(this.key(t), undefined, current.metadata.name!) ?? stored;
      }
      return stored;
    }
    const gone = this.store.remove(this.key(t), current);
    this.afterRemove(t, gone);
    return gone;
  }
}
