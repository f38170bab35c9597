/**
 * Signature approval at the moment of the write. The executor checks each commit the apply would
 * bring itself (sidecar/approval-recheck.ts), against the keys the claim's keys Secret holds as
 * read then, by name: a key removed since the send (one leaked, a person gone) approves nothing
 * any more, and a signer the attempt names counts for nothing. A Secret gone or not readable
 * trusts no key: the attempt starts nothing (it fails closed).
 */

import type { SignatureSpec } from "../queue/governance/model.js";
import { governanceOf } from "../queue/governance/objects.js";
import type { KeysSecrets } from "../queue/governance/signatures.js";
import { apiFailure, type KObject, type Kube } from "../queue/kube/index.js";

/** The signature approval the claim (or its GitTargets) requires, if any. Pure. */
export function signatureSpecOf(claim: KObject, targets: readonly KObject[]): SignatureSpec | undefined {
  for (const t of targets) {
    const s = governanceOf(t, claim)?.approval?.signature;
    if (s) return s;
  }
  return undefined;
}

/** Keys Secrets read by name from the API server, uncached (one GET each time they are asked for). */
export function keysFromKube(kube: Kube): KeysSecrets {
  return async (namespace, name) => {
    try {
      return {
        ok: true,
        data: (await kube.request(() => kube.core.readNamespacedSecret({ namespace, name }))).data ?? {},
      };
    } catch (err) {
      const f = apiFailure(err);
      // The worker's words for a 403 name its own binding: the executor's is another.
      return f.code === 403
        ? {
            ok: false,
            code: undefined,
            message: `the executor may not read it (bind applygate-secret-reader in ${namespace})`,
          }
        : { ok: false, code: f.code, message: f.message };
    }
  };
}
