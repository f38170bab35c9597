/**
 * The keys Secrets of signature approval as the worker reads them: from the objects of a
 * `--targets-file`, and each one's digest put into the listing the decision core is fed.
 */
import { type KeysSecrets, keysDigest } from "../governance/signatures.js";
import { fieldOf, secretFields } from "../kube/readers.js";
import type { KObject } from "../kube/resources.js";
import type { BranchListing } from "./catalog.js";

/** Keys Secrets from objects held in memory (a `--targets-file`): `data` as is, `stringData` encoded. */
export function keysFromObjects(objects: readonly KObject[]): KeysSecrets {
  return async (namespace, name) => {
    const s = objects.find(
      (o) =>
        o.kind === "Secret" && o.metadata.name === name && (o.metadata.namespace ?? "default") === namespace,
    );
    if (!s) return { ok: false, code: 404, message: `Secret ${name} does not exist` };
    const data = { ...(fieldOf(secretFields, s, "data") ?? {}) };
    for (const [k, v] of Object.entries(fieldOf(secretFields, s, "stringData") ?? {}))
      data[k] = Buffer.from(v, "utf8").toString("base64");
    return { ok: true, data };
  };
}

/** Puts the digest of each keys Secret the listed GitTargets name into their governance. */
export async function withKeyDigests(
  listing: BranchListing,
  secrets: KeysSecrets | undefined,
): Promise<void> {
  for (const t of listing.targets) {
    const sig = t.governance?.approval?.signature;
    if (!sig) continue;
    sig.keys = secrets
      ? keysDigest(await secrets(sig.secret.namespace, sig.secret.name))
      : keysDigest({ ok: false, code: undefined, message: "no Secrets are read" });
  }
}
