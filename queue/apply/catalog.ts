/**
 * What the decisions need to know about a branch from the cluster: its GitTargets (uid, claim,
 * consent, suspension), the applier each claim holds and the
 * source that applier reads, and the claims' status for a restart. The mapping from objects is
 * pure; where the objects come from (the Kubernetes API, a YAML file) is an `ObjectSource`.
 */
import { readFile } from "node:fs/promises";
import { parseAllDocuments } from "yaml";
import { type ApplierRef, type ClaimRef, normalizeRepoUrl } from "../contract.js";
import { admitsNamespace, mayHold, objectMeta, RECONCILE_REQUESTED_ANNOTATION } from "../crds/index.js";
import {
  type ClaimStatusSnapshot,
  type FolderRead,
  type ListedTarget,
  matchSyncWindows,
  type SyncWindowSpec,
} from "../decide/index.js";
import { governanceOf } from "../governance/objects.js";
import {
  applicationDestinationOf,
  applicationRepoOf,
  applicationSpecFields,
  appProjectSpecFields,
  claimOperationOf,
  claimSpecFields,
  claimStatusField,
  fieldOf,
  grantViewOf,
  isKObject,
  isRecord,
  kustomizationSourceOf,
  stringsIn,
  syncWindowFields,
  targetField,
} from "../kube/readers.js";
import type { KObject, ResourceKind } from "../kube/resources.js";
import { applierOf, claimOf } from "../references.js";

/**
 * Where the catalog reads objects from, by a kind of the layer's one table (queue/kube/resources.ts).
 * Objects are as the API server returns them (`KObject`): their fields are read through readers.
 */
export interface ObjectSource {
  get(kind: ResourceKind, namespace: string, name: string): Promise<KObject | undefined>;
  /** Every object of a kind in one namespace. */
  list(kind: ResourceKind, namespace: string): Promise<KObject[]>;
  /**
   * Merge-patches a claim's status with what `patch` returns for the current object; a lost
   * optimistic-concurrency race re-reads and retries. Resolves false when the claim is gone.
   */
  patchClaimStatus(
    claim: ClaimRef,
    patch: (current: KObject) => Record<string, unknown> | undefined,
  ): Promise<boolean>;
}

export interface BranchListing {
  targets: ListedTarget[];
  claims: ClaimStatusSnapshot[];
  /** What the branch worker last read of its tip's tree: the GitTargets whose folder it holds. */
  folders?: FolderRead;
}

/** A string read as given only when it is not empty. */
const nonEmpty = (v: string | undefined): string | undefined => (v === "" ? undefined : v);

/** The uid a GitTarget is known by; `namespace/name` when the source gives none (a file). */
export function targetUid(t: KObject): string {
  return t.metadata.uid ?? `${t.metadata.namespace ?? "default"}/${t.metadata.name}`;
}

/**
 * The source an applier reads, as a key appliers sharing it have in common: a Flux
 * Kustomization's `spec.sourceRef` (GitRepository namespace/name), an Argo CD Application's
 * `spec.source.repoURL`. Unknown (the applier not found) is null: the core then uses the claim.
 */
export function sourceOf(applier: ApplierRef, a: KObject | undefined): string | null {
  if (!a || applier.kind === "webhook") return null;
  if (applier.kind === "flux") {
    // A key only: a kind-less sourceRef grouped with the GitRepository of its name orders more, never less.
    const ref = kustomizationSourceOf(a, "GitRepository");
    return ref ? `flux/${ref.kind}/${ref.namespace}/${ref.name}` : null;
  }
  const url = applicationRepoOf(a);
  return url ? `argocd/${normalizeRepoUrl(url)}` : null;
}

/** What a claim's status holds for a restart: the operation, repairPending, the last applied commit. */
export function snapshotOf(
  claim: ClaimRef,
  applier: ApplierRef,
  source: string,
  c: KObject,
): ClaimStatusSnapshot {
  const s: ClaimStatusSnapshot = { claim, applier, source };
  const last = nonEmpty(claimStatusField(c, "lastAppliedCommit"));
  if (last) s.lastAppliedCommit = last;
  if (claimStatusField(c, "repairPending") === true) s.repairPending = true;
  const operation = claimOperationOf(c);
  if (operation) s.operation = operation;
  return s;
}

/**
 * Whether the GitTarget may apply through the claim it names, and the claim may hold its applier:
 * a claim in another namespace must admit the GitTarget's (`spec.accessFrom`), and an applier in
 * another namespace than the claim's must be granted there by an ApplierGrant. A GitTarget that
 * fails either applies through nothing, so no attempt is ever sent for it.
 */
export async function standsGranted(
  source: ObjectSource,
  target: KObject,
  claim: ClaimRef,
  c: KObject,
  applier: ApplierRef,
): Promise<boolean> {
  const targetNs = target.metadata.namespace ?? "default";
  if (!admitsNamespace(claim.namespace, fieldOf(claimSpecFields, c.spec, "accessFrom"), targetNs))
    return false;
  if (applier.namespace === claim.namespace) return true;
  const grants = (await source.list("ApplierGrant", applier.namespace)).map((g) =>
    grantViewOf(g, applier.namespace),
  );
  return mayHold(
    {
      claimKind: claim.kind,
      claimNamespace: claim.namespace,
      applierNamespace: applier.namespace,
      applierName: applier.name,
    },
    grants,
  );
}

/**
 * Everything a branch's listing reads of a claim, as one string: its spec, annotations and
 * deletion, and of its status the fields `snapshotOf`, `reconcileOf` and `governanceOf` read. Two
 * versions of a claim that agree here list alike, so a change elsewhere (conditions, history, the
 * rest of the governance status: most of the status writes of an apply) need not relist its
 * branch. Whoever makes the listing read another field of a claim adds it here.
 */
export function claimListingView(c: KObject): string {
  const status = isRecord(c.status) ? c.status : {};
  const governance = isRecord(status.governance) ? status.governance : {};
  return JSON.stringify([
    c.metadata.name,
    c.metadata.namespace,
    c.metadata.annotations,
    c.metadata.deletionTimestamp,
    c.spec,
    status.operation,
    status.lastAppliedCommit,
    status.repairPending,
    status.lastHandledReconcileAt,
    governance.overrideUsed,
  ]);
}

/** The claim's reconcile request (its annotation) and the value its status says was taken. */
export function reconcileOf(c: KObject): ListedTarget["reconcile"] | undefined {
  const annotations = fieldOf(objectMeta, c.metadata, "annotations");
  const requestedAt = nonEmpty(annotations?.[RECONCILE_REQUESTED_ANNOTATION]);
  const handled = nonEmpty(claimStatusField(c, "lastHandledReconcileAt"));
  if (requestedAt === undefined && handled === undefined) return undefined;
  return {
    ...(requestedAt !== undefined ? { requestedAt } : {}),
    ...(handled !== undefined ? { handled } : {}),
  };
}

/** The AppProject's sync windows, as stored (entries without a kind, schedule or duration left out). */
export function syncWindowsIn(project: KObject | undefined): SyncWindowSpec[] {
  const list = fieldOf(appProjectSpecFields, project?.spec, "syncWindows") ?? [];
  return list.flatMap((w) => {
    const field = <K extends keyof typeof syncWindowFields.shape & string>(key: K) =>
      fieldOf(syncWindowFields, w, key);
    const kind = field("kind");
    const schedule = field("schedule");
    const duration = field("duration");
    if (kind === undefined || schedule === undefined || duration === undefined) return [];
    const out: SyncWindowSpec = { kind, schedule, duration };
    for (const f of ["applications", "namespaces", "clusters"] as const) {
      const v = stringsIn(field(f));
      if (v.length > 0) out[f] = v;
    }
    if (field("manualSync") === true) out.manualSync = true;
    if (field("andOperator") === true) out.andOperator = true;
    const tz = field("timeZone");
    if (tz !== undefined) out.timeZone = tz;
    return [out];
  });
}

/**
 * The sync windows of an Argo CD Application's AppProject that belong to it. A project that cannot
 * be read counts as none: Argo CD holds the sync by itself, the claim only says less.
 */
async function syncWindowsOfApplication(
  source: ObjectSource,
  app: KObject,
  argocdNamespace: string,
): Promise<SyncWindowSpec[]> {
  const name = fieldOf(applicationSpecFields, app.spec, "project") ?? "default";
  let project: KObject | undefined;
  try {
    project = await source.get("AppProject", argocdNamespace, name);
  } catch {
    return [];
  }
  const destination = applicationDestinationOf(app);
  return matchSyncWindows(syncWindowsIn(project), { name: app.metadata.name, destination });
}

export interface ListOptions {
  /** Argo CD's own namespace, where AppProjects live (default `argocd`). */
  argocdNamespace?: string;
}

/**
 * Lists the GitTargets named (namespace/name) with their claims, appliers and sources, and the
 * status of every claim they name. A GitTarget or claim that is gone is left out.
 */
export async function listBranch(
  source: ObjectSource,
  names: Array<{ namespace: string; name: string }>,
  opts: ListOptions = {},
): Promise<BranchListing> {
  const projects = new Map<string, Promise<SyncWindowSpec[]>>();
  const targets: ListedTarget[] = [];
  const claims = new Map<string, ClaimStatusSnapshot>();
  const appliers = new Map<string, Promise<KObject | undefined>>();
  // The Approvals of each claim namespace, read once per listing.
  const approvals = new Map<string, Promise<KObject[]>>();
  const approvalsIn = (ns: string) => {
    let a = approvals.get(ns);
    if (!a) {
      a = source.list("Approval", ns);
      approvals.set(ns, a);
    }
    return a;
  };
  for (const n of names) {
    const t = await source.get("GitTarget", n.namespace, n.name);
    if (!t) continue;
    const listed: ListedTarget = {
      uid: targetUid(t),
      namespace: n.namespace,
      name: n.name,
      claim: null,
      applier: null,
      source: null,
      onRefusal: targetField(t, "onRefusal") === "Reapply" ? "Reapply" : "Ignore",
      suspended: targetField(t, "suspend") === true,
    };
    const path = targetField(t, "path");
    if (path !== undefined) listed.path = path;
    targets.push(listed);
    const claim = claimOf(t);
    if (!claim) continue;
    const c = await source.get(claim.kind, claim.namespace, claim.name);
    const applier = c ? applierOf(claim, c) : null;
    if (!c || !applier) continue;
    if (!(await standsGranted(source, t, claim, c, applier))) continue;
    const aKey = `${applier.kind}/${applier.namespace}/${applier.name}`;
    let a = appliers.get(aKey);
    // A webhook endpoint has no object of its own to read: its source is the claim.
    if (!a && applier.kind === "webhook") a = Promise.resolve(undefined);
    if (!a) {
      a = source.get(
        applier.kind === "flux" ? "Kustomization" : "Application",
        applier.namespace,
        applier.name,
      );
      appliers.set(aKey, a);
    }
    const app = await a;
    const src = sourceOf(applier, app) ?? `claim/${claim.kind}/${claim.namespace}/${claim.name}`;
    Object.assign(listed, { claim, applier, source: src });
    let governance = governanceOf(t, { ...c, kind: claim.kind }, await approvalsIn(claim.namespace));
    if (applier.kind === "argocd" && app) {
      let windows = projects.get(aKey);
      if (!windows) {
        windows = syncWindowsOfApplication(source, app, opts.argocdNamespace ?? "argocd");
        projects.set(aKey, windows);
      }
      const syncWindows = await windows;
      if (syncWindows.length > 0) governance = { ...(governance ?? { changeWindows: [] }), syncWindows };
    }
    if (governance) listed.governance = governance;
    const reconcile = reconcileOf(c);
    if (reconcile) listed.reconcile = reconcile;
    claims.set(`${claim.kind}/${claim.namespace}/${claim.name}`, snapshotOf(claim, applier, src, c));
  }
  return { targets, claims: [...claims.values()] };
}

/** Objects held in memory (from a YAML file, or a test): status patches change them in place. */
export class MemoryObjects implements ObjectSource {
  constructor(readonly objects: KObject[] = []) {}

  private find(kind: string, namespace: string, name: string): KObject | undefined {
    return this.objects.find(
      (o) => o.kind === kind && o.metadata.name === name && (o.metadata.namespace ?? "default") === namespace,
    );
  }

  async get(kind: ResourceKind, namespace: string, name: string): Promise<KObject | undefined> {
    const o = this.find(kind, namespace, name);
    return o ? structuredClone(o) : undefined;
  }

  async list(kind: ResourceKind, namespace: string): Promise<KObject[]> {
    return this.objects
      .filter((o) => o.kind === kind && (o.metadata.namespace ?? "default") === namespace)
      .map((o) => structuredClone(o));
  }

  async patchClaimStatus(
    claim: ClaimRef,
    patch: (current: KObject) => Record<string, unknown> | undefined,
  ): Promise<boolean> {
    const o = this.find(claim.kind, claim.namespace, claim.name);
    if (!o) return false;
    const p = patch(structuredClone(o));
    if (p) o.status = { ...(isRecord(o.status) ? o.status : {}), ...p };
    return true;
  }
}

/** Objects from a multi-document YAML file (GitTargets, claims, Kustomizations, Applications). */
export async function loadObjectsFile(path: string): Promise<MemoryObjects> {
  const docs: unknown[] = parseAllDocuments(await readFile(path, "utf8")).map((d) => d.toJSON());
  return new MemoryObjects(docs.filter(isKObject));
}
