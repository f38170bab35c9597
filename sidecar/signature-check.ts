/**
 * Signature approval at the moment of the write. A commit and its signature never change; what
 * can change since the send is which keys are trusted: a key removed from the keys Secret (one
 * leaked, a person gone) approves nothing any more. So the executor reads the Secret again, by
 * name, and each approval the attempt carries must name a key (`signedBy`, and in a tag mode the
 * tag's `tag.signedBy`) still in it. A Secret
 * gone or not readable trusts no key: the attempt starts nothing (it fails closed).
 */
import type { KubeLike } from "../queue/apply/catalog.js";
import { governanceOf } from "../queue/apply/governance.js";
import type { Attempt } from "../queue/contract.js";
import { StatusReason } from "../queue/crds/reasons.js";
import type { ApprovalSource, SignatureSpec } from "../queue/decide/index.js";
import { readTrustedKeys } from "../queue/git/signature.js";
import { apiFailure, type KObject, type Kube } from "../queue/kube/index.js";
import type { GovernanceRefusal } from "./governance-check.js";

/** The fingerprints of the keys a keys Secret trusts now, or why it cannot be read. */
export type TrustedFingerprints = { ok: true; keys: ReadonlySet<string> } | { ok: false; message: string };

/** The signature approval the claim (or its GitTargets) requires, if any. Pure. */
export function signatureSpecOf(claim: KObject, targets: readonly KObject[]): SignatureSpec | undefined {
  for (const t of targets) {
    const s = governanceOf(t as KubeLike, claim as KubeLike)?.approval?.signature;
    if (s) return s;
  }
  return undefined;
}

/** Why the signature approvals the attempt carries no longer hold, or undefined. Pure. */
export function signatureRefusal(
  attempt: Attempt,
  sources: readonly ApprovalSource[],
  trusted: TrustedFingerprints | undefined,
): GovernanceRefusal | undefined {
  if (!sources.includes("Signature") || !attempt.approvals) return undefined;
  const refuse = (message: string): GovernanceRefusal => ({
    phase: "RequestFailed",
    reason: StatusReason.NotApproved,
    message,
  });
  const unsigned = attempt.approvals.filter((a) => !a.signedBy);
  if (unsigned.length > 0)
    return refuse(
      `the claim requires a signature and the attempt carries none for ${unsigned.map((a) => a.commit.slice(0, 12)).join(", ")}`,
    );
  if (!trusted?.ok) return refuse(`the keys cannot be read at the write: ${trusted?.message ?? "not read"}`);
  // In the tag modes the tag's key must still be trusted too (in mode Tag it is `signedBy`).
  const revoked = attempt.approvals.flatMap((a) => {
    const keys = [a.signedBy as string, ...(a.tag ? [a.tag.signedBy] : [])];
    const gone = [...new Set(keys)].filter((k) => !trusted.keys.has(k));
    return gone.length > 0 ? [{ a, gone }] : [];
  });
  if (revoked.length === 0) return undefined;
  return refuse(
    `signing key no longer trusted since the send: ${revoked
      .map(
        ({ a, gone }) => `${a.commit.slice(0, 12)} (${a.tag ? `tag ${a.tag.name}: ` : ""}${gone.join(", ")})`,
      )
      .join(", ")} (Signature)`,
  );
}

/** Reads the keys Secret by name (one GET) and the fingerprints of the keys it holds. */
export async function readTrustedFingerprints(kube: Kube, spec: SignatureSpec): Promise<TrustedFingerprints> {
  const { namespace, name } = spec.secret;
  let data: Record<string, string>;
  try {
    data = (await kube.core.readNamespacedSecret({ namespace, name })).data ?? {};
  } catch (err) {
    const f = apiFailure(err);
    return {
      ok: false,
      message:
        f.code === 404
          ? `the keys Secret ${namespace}/${name} does not exist`
          : f.code === 403
            ? `the executor may not read the keys Secret ${namespace}/${name} (bind applygate-secret-reader in ${namespace})`
            : `the keys Secret ${namespace}/${name}: ${f.message}`,
    };
  }
  const keys = await readTrustedKeys(
    Object.values(data).map((b64) => Buffer.from(b64, "base64").toString("utf8")),
  );
  return {
    ok: true,
    keys: new Set([
      ...keys.ssh.map((k) => k.fingerprint),
      ...keys.openpgp.map((k) => k.getFingerprint().toUpperCase()),
    ]),
  };
}
