/**
 * The Kubernetes side of the worker, kept out of the branch worker's loop: GitTarget status
 * written through the status subresource (merge patch with a resourceVersion precondition, on the
 * shared conflict-retry policy), and branch specs read from the caches of GitProviders, GitTargets,
 * ScopeGrants and Secrets.
 */
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { API_VERSION, GIT_TARGET_KIND, type GitProvider, type GitTarget } from "../crds/index.js";
import { StatusReason } from "../crds/reasons.js";
import {
  type Directory,
  type DirectoryOptions,
  directoryFromObjects,
  insecureCredentials,
} from "../directory.js";
import { errorMessage } from "../errors.js";
import {
  ConflictRetriesExhausted,
  isNotFound,
  type Kube,
  type OwnedStatus,
  RESOURCES,
  retryOnConflict,
  type StatusWriter,
  statusWriter,
} from "../kube/index.js";
import type { Logger } from "../log.js";
import { judgeHolding, providerFacts, targetFacts } from "../tenancy.js";
import type { ClusterCache } from "./cluster-cache.js";
import {
  type AcceptanceProblem,
  acceptanceConditions,
  acceptanceShown,
  type Condition,
  type CredentialsProblem,
  credentialsCondition,
  type PublicationReport,
  publicationConditions,
  publicationStatus,
  refusalCondition,
  type StatusSink,
  type TargetRef,
  type WriteRefusal,
} from "./status.js";

type TargetStatus = OwnedStatus<"gitTarget", "branch-worker">;

/** A merge patch keeps fields it does not mention: say null for those that no longer apply. */
function withNulls(p: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...p };
  for (const k of ["commit", "publishedAt", "retryingSince", "lastError", "nextRetryAt"])
    if (!(k in out)) out[k] = null;
  return out;
}

/**
 * Whether a status merge patch would change nothing the object's status shows: every field it
 * names holds that value already (a null: the field is absent). Pure.
 */
export function patchChangesNothing(current: unknown, patch: unknown): boolean {
  if (patch === null) return current === undefined || current === null;
  if (typeof patch === "object" && !Array.isArray(patch)) {
    if (current === null || typeof current !== "object" || Array.isArray(current)) return false;
    const cur = current as Record<string, unknown>;
    return Object.entries(patch as Record<string, unknown>).every(([k, v]) => patchChangesNothing(cur[k], v));
  }
  return JSON.stringify(current) === JSON.stringify(patch);
}

export class KubeStatusSink implements StatusSink {
  private readonly status: StatusWriter<"gitTarget", "branch-worker">;
  /** The resourceVersion each of our status writes left, by GitTarget: the cache shows it once it has it. */
  private readonly written = new Map<string, string>();

  constructor(
    private readonly kube: Kube,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
    private readonly maxAttempts = 8,
    /** Where the first read of a status write comes from (a lost race reads the API server). */
    private readonly cache?: Pick<ClusterCache, "targets">,
  ) {
    this.status = statusWriter(kube, "gitTarget", "branch-worker");
  }

  /** Writes every GitTarget of the branch at once (a report is one state, shown on each). */
  async report(targets: TargetRef[], report: PublicationReport): Promise<void> {
    await Promise.all(targets.map((t) => this.reportOn(t, report)));
  }

  private async reportOn(t: TargetRef, report: PublicationReport): Promise<void> {
    await this.write(t, (current, generation) => {
      const previous = current.status?.conditions as Condition[] | undefined;
      const own = publicationConditions(report, previous, this.now(), generation);
      // Conditions the publication does not own (WriteRefused) are kept as they are.
      const others = (previous ?? []).filter((c) => !own.some((o) => o.type === c.type));
      return { publication: withNulls(publicationStatus(report)), conditions: [...own, ...others] };
    });
  }

  /** Sets CredentialsAvailable on each GitTarget of a GitProvider whose credentials Secret was (not) read. */
  async credentials(targets: TargetRef[], problem: CredentialsProblem | undefined): Promise<void> {
    for (const t of targets)
      await this.write(t, (current, generation) => {
        const previous = current.status?.conditions as Condition[] | undefined;
        const condition = credentialsCondition(problem, previous, this.now(), generation);
        return { conditions: [...(previous ?? []).filter((c) => c.type !== condition.type), condition] };
      });
  }

  /** Sets Accepted (and Ready while refused) on a GitTarget the worker refuses or takes again. */
  async accepted(t: TargetRef, problem: AcceptanceProblem | undefined): Promise<void> {
    await this.write(t, (current, generation) => {
      const previous = current.status?.conditions as Condition[] | undefined;
      const own = acceptanceConditions(problem, previous, this.now(), generation);
      return { conditions: [...(previous ?? []).filter((c) => !own.some((o) => o.type === c.type)), ...own] };
    });
  }

  /** Sets WriteRefused on the GitTarget and records an Event (with `action`) about the refusal. */
  async refused(t: TargetRef, refusal: WriteRefusal | undefined): Promise<void> {
    let uid: string | undefined;
    await this.write(t, (current, generation) => {
      uid = current.metadata.uid;
      const previous = current.status?.conditions as Condition[] | undefined;
      const condition = refusalCondition(refusal, previous, this.now(), generation);
      return { conditions: [...(previous ?? []).filter((c) => c.type !== condition.type), condition] };
    });
    if (!refusal) return;
    try {
      await this.kube.createEvent({
        name: `${t.name}.${randomBytes(8).toString("hex")}`,
        eventTime: new Date(this.now()),
        type: "Warning",
        reason: StatusReason.WriteRefused,
        action: "Refuse",
        note: `write ${refusal.writeId}${refusal.object ? ` (${refusal.object})` : ""} refused (${refusal.reason}): ${refusal.message}`,
        regarding: {
          apiVersion: API_VERSION,
          kind: GIT_TARGET_KIND,
          namespace: t.namespace,
          name: t.name,
          uid,
        },
        reportingController: "applygate.dev/worker",
        reportingInstance: hostname(),
      });
    } catch (err) {
      this.log.warn(
        { err: errorMessage(err), target: `${t.namespace}/${t.name}` },
        "could not record the refusal Event",
      );
    }
  }

  /**
   * Merge-patches the status the builder returns, on the shared conflict-retry policy: the first
   * read is the cache's (when there is one), a lost race reads the API server and recomputes.
   */
  private async write(
    t: TargetRef,
    build: (current: GitTarget, generation: number | undefined) => TargetStatus,
  ): Promise<void> {
    let attempt = 0;
    const key = `${t.namespace}/${t.name}`;
    // What a read shows is to be trusted for "unchanged" only when it is the server's, or a cached
    // object that already holds our own last write (a cache a write ahead of it would hide that
    // write, and a status going back to what the cache shows would never be written).
    let trusted = false;
    const read = async (): Promise<GitTarget | undefined> => {
      const cached = attempt++ === 0 ? this.cache?.targets.get(t.name, t.namespace) : undefined;
      if (cached) {
        const mine = this.written.get(key);
        trusted = mine === undefined || mine === cached.metadata.resourceVersion;
        return cached;
      }
      trusted = true;
      // Undefined when the GitTarget is gone: nothing to report on.
      return this.kube.get<GitTarget>(RESOURCES.gitTarget, t.namespace, t.name);
    };
    try {
      await retryOnConflict(
        read,
        (current) => {
          if (!current) return undefined;
          const generation = current.metadata.generation as number | undefined;
          const status: TargetStatus = {
            ...build(current, generation),
            ...(generation !== undefined ? { observedGeneration: generation } : {}),
          };
          // A status that already shows this costs no request: a replica taking over a thousand
          // branches would otherwise patch every GitTarget with what it says already.
          if (trusted && patchChangesNothing(current.status ?? {}, status)) return undefined;
          return status;
        },
        // Seed 003: a lost optimistic-concurrency race is re-read and retried, never a wedge.
        async (current, status) => {
          const out = await this.status.patch<GitTarget>(
            RESOURCES.gitTarget,
            t.namespace,
            t.name,
            status,
            current?.metadata.resourceVersion,
          );
          const rv = out?.metadata?.resourceVersion;
          if (rv) this.written.set(key, rv);
          else this.written.delete(key);
          return out;
        },
        { max: this.maxAttempts, what: `status of GitTarget ${t.namespace}/${t.name}` },
      );
    } catch (err) {
      if (isNotFound(err)) return; // deleted between the read and the write
      if (err instanceof ConflictRetriesExhausted)
        this.log.warn({ target: `${t.namespace}/${t.name}` }, err.message);
      throw err;
    }
  }
}

/** Where a credentials Secret that cannot be read is told: a log line and the GitTargets' condition. */
export interface CredentialsReporter {
  log: Logger;
  status?: Pick<KubeStatusSink, "credentials"> & Partial<Pick<KubeStatusSink, "accepted">>;
}

/**
 * Branch specs from the worker's caches of GitProviders, GitTargets, ScopeGrants and the credential
 * Secrets they name (cluster-cache.ts): a lookup makes no request once the caches are listed.
 */
export class KubeDirectory implements Directory {
  /** The last credentials outcome per GitProvider (namespace/name): told only when it changes. */
  private readonly credentialsSeen = new Map<string, string>();

  constructor(
    private readonly cache: ClusterCache,
    private readonly reporter?: CredentialsReporter,
    private readonly options: DirectoryOptions = {},
  ) {}

  /** A credentials Secret read, or not: logs and sets the condition on the provider's GitTargets when it changes. */
  private async credentialsRead(
    provider: GitProvider,
    targets: GitTarget[],
    secret: string,
    problem: CredentialsProblem | undefined,
  ): Promise<void> {
    if (!this.reporter) return;
    const ns = provider.metadata.namespace ?? "default";
    const key = `${ns}/${provider.metadata.name}`;
    const outcome = problem?.reason ?? "read";
    if (this.credentialsSeen.get(key) === outcome) return;
    const first = !this.credentialsSeen.has(key);
    this.credentialsSeen.set(key, outcome);
    if (problem)
      this.reporter.log.warn(
        { provider: key, secret: `${ns}/${secret}`, reason: problem.reason },
        `cannot read the GitProvider's credentials Secret: ${problem.message}`,
      );
    else if (first)
      return; // read from the start: nothing to tell or to clear
    else
      this.reporter.log.info(
        { provider: key, secret: `${ns}/${secret}` },
        "credentials Secret readable again",
      );
    const refs = targets
      .filter(
        (t) =>
          t.spec.providerRef.name === provider.metadata.name && (t.metadata.namespace ?? "default") === ns,
      )
      .map((t) => ({ namespace: t.metadata.namespace ?? "default", name: t.metadata.name }));
    await this.reporter.status
      ?.credentials(refs, problem)
      .catch((err: unknown) =>
        this.reporter?.log.warn(
          { err: errorMessage(err), provider: key },
          "could not write CredentialsAvailable",
        ),
      );
  }

  /**
   * Sets Accepted=False on each GitTarget whose GitProvider does not admit its namespace
   * (ProviderNamespaceNotAllowed) or may not be used (RepositoryHeld: another holds its
   * repository), or whose folder another namespace's GitTarget holds (FolderHeld), and
   * Accepted=True once it may, when its conditions do not say so already.
   */
  private async acceptance(providers: GitProvider[], targets: GitTarget[]): Promise<void> {
    const accepted = this.reporter?.status?.accepted;
    if (!accepted) return;
    const holding = judgeHolding(providers.map(providerFacts), targets.map(targetFacts));
    for (const t of targets) {
      const ns = t.metadata.namespace ?? "default";
      const pns = t.spec.providerRef.namespace ?? ns;
      const p = providers.find(
        (x) => x.metadata.name === t.spec.providerRef.name && (x.metadata.namespace ?? "default") === pns,
      );
      if (!p) continue;
      const problem = holding.target({
        namespace: ns,
        name: t.metadata.name,
        providerNamespace: pns,
        providerName: p.metadata.name,
      });
      if (acceptanceShown(problem, t.status?.conditions as Condition[] | undefined)) continue;
      const target = `${ns}/${t.metadata.name}`;
      if (problem)
        this.reporter?.log.warn({ target, reason: problem.reason }, `GitTarget refused: ${problem.message}`);
      else this.reporter?.log.info({ target }, "GitTarget accepted: its GitProvider may be used");
      await accepted
        .call(this.reporter?.status, { namespace: ns, name: t.metadata.name }, problem)
        .catch((err: unknown) =>
          this.reporter?.log.warn({ err: errorMessage(err), target }, "could not write Accepted"),
        );
    }
  }

  /** The directory built from the caches, rebuilt only when what it reads changed (`ClusterCache.version`). */
  private built: { version: number; directory: Promise<Directory> } | undefined;

  /**
   * A lookup answers from the directory built at the caches' current version: a replica taking a
   * thousand branches builds it once, not once per branch over every GitTarget of the cluster.
   */
  async branch(key: string) {
    await this.cache.start();
    const version = this.cache.version;
    if (this.built?.version !== version) {
      const directory = this.build();
      this.built = { version, directory };
      // A build that failed is not kept: the next lookup builds again.
      directory.catch(() => {
        if (this.built?.directory === directory) this.built = undefined;
      });
    }
    return (await this.built.directory).branch(key);
  }

  private async build(): Promise<Directory> {
    const providers = this.cache.providers.list();
    const targets = this.cache.targets.list();
    // Without the ScopeGrant kind installed nobody holds a grant: every target keeps its own scope.
    const grants = this.cache.grants();
    const secrets = [];
    for (const p of providers) {
      const ref = p.spec.credentialsSecretRef;
      if (!ref) continue;
      const ns = p.metadata.namespace ?? "default";
      const read = await this.cache.secret(ns, ref.name);
      if (read.ok) {
        secrets.push({
          kind: "Secret" as const,
          metadata: { name: ref.name, namespace: ns },
          data: read.data,
        });
        // Read, but not sent over plain http unless the operator allows it.
        const problem: CredentialsProblem | undefined = insecureCredentials(p, this.options)
          ? {
              reason: StatusReason.InsecureTransport,
              message:
                "the credentials are not sent over plain http (spec.url is http://): use https, or let the operator allow it (--allow-http-credentials)",
            }
          : undefined;
        await this.credentialsRead(p, targets, ref.name, problem);
      } else {
        // The provider goes on without credentials (a push then fails with auth); say why.
        const problem: CredentialsProblem =
          read.code === 403
            ? {
                reason: StatusReason.SecretForbidden,
                message: `the worker may not read Secret ${ref.name} (403)`,
              }
            : read.code === 404
              ? { reason: StatusReason.SecretNotFound, message: `Secret ${ref.name} does not exist` }
              : { reason: StatusReason.SecretUnreadable, message: `Secret ${ref.name}: ${read.message}` };
        await this.credentialsRead(p, targets, ref.name, problem);
      }
    }
    await this.acceptance(providers, targets);
    return directoryFromObjects(providers, targets, secrets, grants, this.options);
  }
}
