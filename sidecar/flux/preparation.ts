import type { Attempt } from "../../queue/contract.js";
import { StatusReason } from "../../queue/crds/reasons.js";
import {
  artifactRevisionOf,
  fluxSpecField,
  fluxSuspended,
  gitRepositoryRefOf,
  type KObject,
  KubeError,
  kustomizationSourceOf,
  readFluxClaim,
} from "../../queue/kube/index.js";
import type { Logger } from "../../queue/log.js";
import { isNotStarted, notStarted, type SafetyChecks } from "../applier-kind.js";
import { isConditionTrue } from "../claims/conditions.js";
import { sameRepository } from "../claims/eligibility.js";
import type { ClaimLocator } from "../operation-record.js";
import { type FluxClient, newToken, srcWakeKey } from "./client.js";
import { artifactHolds, showsToken, tokenHandled } from "./outcome.js";
import { keyOf, type ObjectKey } from "./resources.js";
import { checkSuspendOwnership } from "./suspend-owner.js";

/** A cached GitRepository that does not show our stamp yet. */
const BEHIND = Symbol("behind");

export interface PreparationDeps {
  client: FluxClient;
  checks: SafetyChecks;
  now: () => Date;
  /** How long step 1 waits for the GitRepository to handle its token. */
  sourceTimeoutMs: number;
}

export async function prepare(
  d: PreparationDeps,
  o: { attempt: Attempt; claim: ClaimLocator; ref: ObjectKey; signal: AbortSignal; log: Logger },
) {
  const { attempt, claim, ref, signal, log } = o;
  // The Kustomization and its source are read beside the claim; the claim's refusals come first.
  const applier = checkApplierFresh(d, attempt, ref);
  applier.catch(() => {}); // awaited below, unless the claim already refuses
  const c = await d.client.kube.get<KObject>(claim.type, claim.namespace, claim.name);
  if (!c)
    return notStarted(
      "RequestFailed",
      StatusReason.ClaimNotFound,
      `FluxClaim ${keyOf(claim)} does not exist`,
    );
  if (c.metadata.deletionTimestamp)
    return notStarted("RequestFailed", StatusReason.ClaimDeleting, "the claim is being deleted");
  const typed = readFluxClaim(c);
  if (!typed.ok)
    return notStarted(
      "Rejected",
      StatusReason.InvalidSpec,
      `the FluxClaim does not fit its schema: ${typed.error}`,
    );
  const want = typed.value.spec.kustomizationRef;
  if (want?.name !== ref.name || want?.namespace !== ref.namespace) {
    return notStarted(
      "Rejected",
      StatusReason.ApplierMismatch,
      `the claim holds ${want ? keyOf(want) : "nothing"}, not ${keyOf(ref)}`,
    );
  }
  if (!isConditionTrue(typed.value.status?.conditions, "InControl")) {
    return notStarted(
      "RequestFailed",
      StatusReason.NotInControl,
      "the claim does not hold its Kustomization suspended (InControl is not True)",
    );
  }

  // 1. The artifact must hold the commit.
  const first = await applier;
  if (isNotStarted(first)) return first;
  // A cache behind the server never costs a fetch: an artifact not seen there is read again.
  let source = artifactHolds(first.source, attempt.commit)
    ? first.source
    : ((await d.client.source(first.sourceRef)) ?? first.source);
  if (!artifactHolds(source, attempt.commit)) {
    if (fluxSuspended(source)) {
      return notStarted(
        "RequestFailed",
        StatusReason.SourceSuspended,
        `GitRepository ${keyOf(first.sourceRef)} is suspended`,
      );
    }
    const token = newToken(d.now());
    try {
      await d.client.stampSource(first.sourceRef, token);
    } catch (err) {
      // Nothing started yet: the attempt ends here and the worker decides the retry (2 s
      // backoff). A stamp that landed despite the error only makes the source fetch once more.
      if (!(err instanceof KubeError) || err.code === 404) throw err;
      return notStarted(
        "RequestFailed",
        StatusReason.SourceRequestFailed,
        `the stamp of GitRepository ${keyOf(first.sourceRef)} failed: ${err.message}`,
      );
    }
    log.debug({ sourceToken: token }, "stamped the GitRepository");
    // From the watch's cache after an event (the fetch's end is one), from the API server when
    // the interval passed without one. A cached copy without our stamp is behind it (it would show
    // ours as stamped over and handled): the next event is waited for.
    const fetched = await d.client.until(
      async (fromCache) => {
        if (!fromCache) return d.client.source(first.sourceRef);
        const cached = await d.client.observedSource(first.sourceRef);
        return cached && !showsToken(cached, token) ? BEHIND : cached;
      },
      (s) => (s === BEHIND ? undefined : !s ? null : tokenHandled(s, token) ? s : undefined),
      {
        wakeKey: srcWakeKey(first.sourceRef),
        signal,
        deadline: d.now().getTime() + d.sourceTimeoutMs,
      },
    );
    if (!fetched) {
      return notStarted(
        "RequestFailed",
        fetched === null ? StatusReason.SourceNotFound : StatusReason.SourceNotFetched,
        "the GitRepository did not fetch in time",
      );
    }
    source = fetched;
    if (!artifactHolds(source, attempt.commit)) {
      const got = artifactRevisionOf(source) ?? "no artifact";
      if (!(await d.checks.tip(attempt))) {
        return notStarted(
          "Stale",
          StatusReason.Stale,
          `the source fetched ${got}; ${attempt.commit} is no longer the tip`,
        );
      }
      return notStarted(
        "RequestFailed",
        StatusReason.ArtifactMismatch,
        `the GitRepository fetched ${got}, not ${attempt.commit}`,
      );
    }
  }

  // 2. Recheck just before the resume (the source read beside the Kustomization: a changed
  // sourceRef is refused below anyway).
  let again = await checkApplierFresh(d, attempt, ref, first.sourceRef);
  if (isNotStarted(again)) return again;
  if (
    again.cached &&
    (again.ks.metadata.uid !== first.ks.metadata.uid ||
      keyOf(again.sourceRef) !== keyOf(first.sourceRef) ||
      !artifactHolds(again.source, attempt.commit))
  ) {
    // Refused on the cache: decided again from the API server (the fetch just seen there may
    // not have reached the watch yet).
    again = await checkApplier(d, attempt, ref, first.sourceRef, false);
    if (isNotStarted(again)) return again;
  }
  if (again.ks.metadata.uid !== first.ks.metadata.uid) {
    return notStarted(
      "RequestFailed",
      StatusReason.KustomizationReplaced,
      "the Kustomization was replaced during the fetch",
    );
  }
  if (keyOf(again.sourceRef) !== keyOf(first.sourceRef)) {
    return notStarted(
      "RequestFailed",
      StatusReason.SourceChanged,
      "the Kustomization's sourceRef changed during the fetch",
    );
  }
  if (!artifactHolds(again.source, attempt.commit)) {
    if (!(await d.checks.tip(attempt))) {
      return notStarted(
        "Stale",
        StatusReason.Stale,
        `${attempt.commit} is no longer the tip of ${attempt.branch}`,
      );
    }
    return notStarted(
      "RequestFailed",
      StatusReason.ArtifactMoved,
      `the artifact moved to ${artifactRevisionOf(again.source)}`,
    );
  }
  if (!(await d.checks.tip(attempt))) {
    return notStarted(
      "Stale",
      StatusReason.Stale,
      `${attempt.commit} is no longer the tip of ${attempt.branch}`,
    );
  }
  return { ...again, claim: c };
}

/**
 * Reads the Kustomization and its GitRepository and checks what a resume requires of them. From
 * the watch's cache when it holds them: the resume is guarded by the resourceVersion read here,
 * so a Kustomization changed since (the cache behind the server) is a 409 that reads the API
 * server again and rechecks; the artifact may move after any read, which the outcome's revision
 * check reports (RevisionMismatch).
 */
export async function checkApplier(
  d: PreparationDeps,
  attempt: Attempt,
  ref: ObjectKey,
  expectedSource?: ObjectKey,
  cached = true,
) {
  const client = d.client;
  const readSource = (r: ObjectKey) => (cached ? client.observedSource(r) : client.source(r));
  const early = expectedSource ? readSource(expectedSource) : undefined;
  early?.catch(() => {}); // awaited below, unless the Kustomization already refuses
  const ks = await (cached ? client.observedKustomization(ref) : client.kustomization(ref));
  if (!ks)
    return notStarted(
      "RequestFailed",
      StatusReason.KustomizationNotFound,
      `Kustomization ${keyOf(ref)} does not exist`,
    );
  if (ks.metadata.deletionTimestamp)
    return notStarted(
      "RequestFailed",
      StatusReason.KustomizationDeleting,
      "the Kustomization is being deleted",
    );
  const owner = checkSuspendOwnership(ks);
  if (!owner.ok) return notStarted("Rejected", owner.reason, owner.message);
  const sourceRef = kustomizationSourceOf(ks, "none");
  if (sourceRef?.kind !== "GitRepository") {
    return notStarted(
      "Rejected",
      StatusReason.UnsupportedSource,
      `the Kustomization reads a ${sourceRef?.kind ?? "missing"} source; only GitRepository is held`,
    );
  }
  const source =
    early && keyOf(sourceRef) === keyOf(expectedSource as ObjectKey)
      ? await early
      : await readSource(sourceRef);
  if (!source)
    return notStarted(
      "RequestFailed",
      StatusReason.SourceNotFound,
      `GitRepository ${keyOf(sourceRef)} does not exist`,
    );
  const url = fluxSpecField(source, "url") ?? "";
  const branch = gitRepositoryRefOf(source).branch;
  if (!sameRepository(url, attempt.repository) || branch !== attempt.branch) {
    return notStarted(
      "Rejected",
      StatusReason.SourceMismatch,
      `the GitRepository fetches ${url} branch ${branch ?? "(none)"}, not ${attempt.repository} branch ${attempt.branch}`,
    );
  }
  return { ks, source, sourceRef, cached };
}

/** checkApplier from the cache; a refusal decided there is decided again from the API server. */
export async function checkApplierFresh(
  d: PreparationDeps,
  attempt: Attempt,
  ref: ObjectKey,
  expectedSource?: ObjectKey,
) {
  const r = await checkApplier(d, attempt, ref, expectedSource);
  return isNotStarted(r) ? checkApplier(d, attempt, ref, expectedSource, false) : r;
}
