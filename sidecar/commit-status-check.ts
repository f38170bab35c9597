/**
 * The commit statuses an apply's approval rests on, read at the moment of the write: the
 * required context (`approval.commitStatus` of the claim or its GitTarget) on each commit the
 * apply would bring (sidecar/approval-recheck.ts), from the commit-status API of the GitProvider the GitTarget names, with that
 * provider's credentials (its Secret's `password`, else `token`; read only where the namespace
 * binds applygate-secret-reader to the sidecar, else the host is asked anonymously), sent only to
 * the provider's own origins. A read that fails is recorded as `error`, so it never counts as
 * approval (`judgeGovernance`).
 */

import type { GitProvider } from "../queue/crds/index.js";
import { secretValue } from "../queue/directory.js";
import { readStatusOf, statusAccess } from "../queue/git/commit-status.js";
import { governanceOf } from "../queue/governance/objects.js";
import { type KObject, type Kube, RESOURCES, targetField } from "../queue/kube/index.js";

/** Undefined when the claim requires no commit status (or there is no commit to read). */
export async function commitStatusesAtWrite(
  kube: Kube,
  commits: readonly string[],
  claim: KObject,
  targets: readonly KObject[],
  opts: { timeoutMs?: number; fetch?: typeof fetch; allowHttpCredentials?: boolean } = {},
): Promise<Record<string, string> | undefined> {
  if (commits.length === 0) return undefined;
  let spec: NonNullable<NonNullable<ReturnType<typeof governanceOf>>["approval"]>["commitStatus"];
  let target: KObject | undefined;
  for (const t of targets) {
    const cs = governanceOf(t, claim)?.approval?.commitStatus;
    if (cs) {
      spec = cs;
      target = t;
      break;
    }
  }
  if (!spec || !target) return undefined;
  const out: Record<string, string> = {};
  try {
    const ref = targetField(target, "providerRef");
    const pns = ref?.namespace ?? target.metadata.namespace ?? "default";
    const provider = ref?.name
      ? await kube.get<GitProvider>(RESOURCES.gitProvider, pns, ref.name)
      : undefined;
    if (!provider) throw new Error(`the GitProvider of GitTarget ${target.metadata.name} is gone`);
    let token: string | undefined;
    const secretRef = provider.spec.credentialsSecretRef;
    if (secretRef) {
      const s = await kube.core
        .readNamespacedSecret({ name: secretRef.name, namespace: pns })
        .catch(() => undefined);
      const secret = s && { kind: "Secret" as const, metadata: { name: secretRef.name }, data: s.data ?? {} };
      if (secret) token = secretValue(secret, "password") ?? secretValue(secret, "token");
    }
    const access = statusAccess(provider.spec, spec.api, token, {
      allowHttp: opts.allowHttpCredentials === true,
    });
    for (const c of commits) {
      try {
        out[c] = await readStatusOf(
          {
            ...access,
            ...(opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {}),
            ...(opts.fetch ? { fetch: opts.fetch } : {}),
          },
          c,
          spec.context,
        );
      } catch {
        out[c] = "error";
      }
    }
  } catch {
    for (const c of commits) out[c] ??= "error";
  }
  return out;
}
