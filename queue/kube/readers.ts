/**
 * Typed readers for our kinds: objects from the API server or an informer parsed with the zod
 * schemas the CRDs are generated from (queue/crds/), instead of cast. The API server enforces the
 * same schema, so a failure means a version skew or a hand-edited object: the reader says which
 * field and skips the object, it never guesses.
 */
import type { z } from "zod";
import {
  type ApplierGrant,
  type ArgoCDClaim,
  applierGrant,
  argoCDClaim,
  type FluxClaim,
  fluxClaim,
  type GitProvider,
  type GitTarget,
  gitProvider,
  gitTarget,
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
