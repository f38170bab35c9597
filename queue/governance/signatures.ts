/**
 * Signature approval: the keys Secret a claim's `approval.signature` names (read where the caller
 * reads Secrets: the worker's cache, the executor's API client), its digest, and each foreign
 * commit's (or tag's) signature checked against its keys. The worker at decision time and the
 * executor at the write check alike.
 */
import { createHash } from "node:crypto";
import { StatusReason } from "../crds/reasons.js";
import type { RemoteTag } from "../git/repo.js";
import {
  readTrustedKeys,
  type SignatureVerdict,
  type TrustedKeys,
  verifyCommit,
  verifyTag,
} from "../git/signature.js";
import type { SignatureRead, SignatureSpec } from "./model.js";
import { type TagRead, tagSignatures } from "./tag-approval.js";

/** A keys Secret as the cache knows it: its data (base64 values), or why it cannot be read. */
export type KeysSecretRead =
  | { ok: true; data: Record<string, string> }
  | { ok: false; code: number | undefined; message: string };

/** Where keys Secrets are read: the worker's cache (`ClusterCache.secret`), watched by name. */
export type KeysSecrets = (namespace: string, name: string) => Promise<KeysSecretRead>;

/** The digest of a keys Secret as read: what the listing tells the core, and a read records. Pure. */
export function keysDigest(read: KeysSecretRead): string {
  if (!read.ok) return `unreadable:${read.code ?? "error"}`;
  const entries = Object.entries(read.data).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `sha256:${createHash("sha256").update(JSON.stringify(entries)).digest("hex")}`;
}

/** Why no key can be trusted when the Secret is not read. Pure. */
function unreadable(spec: SignatureSpec, read: Extract<KeysSecretRead, { ok: false }>): SignatureRead {
  const name = `${spec.secret.namespace}/${spec.secret.name}`;
  const why =
    read.code === 404
      ? `the keys Secret ${name} does not exist`
      : read.code === 403
        ? `the worker may not read the keys Secret ${name} (bind applygate-secret-watcher in ${spec.secret.namespace})`
        : `the keys Secret ${name} cannot be read: ${read.message}`;
  return { ok: false, reason: StatusReason.NoTrustedKeys, message: why };
}

/**
 * Checks commits' signatures against the keys of a Secret. Keeps the keys parsed per digest and
 * each verdict per (digest, commit): a commit and a key set never change, so each is checked once.
 */
export class SignatureReader {
  private readonly parsed = new Map<string, Promise<TrustedKeys>>();
  private readonly verdicts = new Map<string, SignatureRead>();

  constructor(
    private readonly secrets: KeysSecrets | undefined,
    private readonly limit = 10_000,
  ) {}

  /**
   * The signatures of `commits` as the spec's mode reads them: each commit's own (HEAD), the tags
   * on `line` (Tag, see tagSignatures), or both (TagAndHEAD). `tags` lists the repository's tags
   * on `line` (asked only in a tag mode), `rawTagOf` reads a tag object.
   */
  async read(
    spec: SignatureSpec,
    commits: readonly string[],
    rawOf: (oid: string) => Promise<Uint8Array>,
    tagged?: {
      line: readonly string[];
      tags: () => Promise<RemoteTag[]>;
      rawTagOf: (oid: string) => Promise<Uint8Array>;
    },
  ): Promise<{ signatures: Record<string, SignatureRead>; keys: string }> {
    if (spec.mode === "HEAD" || !tagged) return this.readObjects(spec, commits, rawOf, verifyCommit, "");
    const heads =
      spec.mode === "TagAndHEAD" ? await this.readObjects(spec, commits, rawOf, verifyCommit, "") : undefined;
    const remote = await tagged.tags();
    const annotated = remote.filter((t) => t.annotated);
    const read = await this.readObjects(
      spec,
      annotated.map((t) => t.object),
      tagged.rawTagOf,
      verifyTag,
      "tag:",
    );
    const tags: TagRead[] = remote.map((t) => ({
      name: t.name,
      commit: t.commit,
      annotated: t.annotated,
      ...(t.annotated && read.signatures[t.object] ? { verdict: read.signatures[t.object] } : {}),
    }));
    return {
      signatures: tagSignatures(spec.mode, tagged.line, commits, tags, spec.tagPattern, heads?.signatures),
      keys: read.keys,
    };
  }

  private async readObjects(
    spec: SignatureSpec,
    commits: readonly string[],
    rawOf: (oid: string) => Promise<Uint8Array>,
    verify: (raw: Uint8Array, keys: TrustedKeys) => Promise<SignatureVerdict>,
    kind: string,
  ): Promise<{ signatures: Record<string, SignatureRead>; keys: string }> {
    const secret: KeysSecretRead = this.secrets
      ? await this.secrets(spec.secret.namespace, spec.secret.name)
      : { ok: false, code: undefined, message: "no Secrets are read" };
    const keys = keysDigest(secret);
    const signatures: Record<string, SignatureRead> = {};
    if (!secret.ok) {
      const v = unreadable(spec, secret);
      for (const c of commits) signatures[c] = v;
      return { signatures, keys };
    }
    let trusted = this.parsed.get(keys);
    if (!trusted) {
      const texts = Object.values(secret.data).map((b64) => Buffer.from(b64, "base64").toString("utf8"));
      trusted = readTrustedKeys(texts);
      if (this.parsed.size >= 32) this.parsed.delete(this.parsed.keys().next().value as string);
      this.parsed.set(keys, trusted);
    }
    const k = await trusted;
    for (const c of commits) {
      const at = `${keys}:${kind}${c}`;
      let v = this.verdicts.get(at);
      if (!v) {
        const verdict = await verify(await rawOf(c), k);
        v = verdict.ok
          ? { ok: true, key: verdict.key, ...(verdict.signer ? { signer: verdict.signer } : {}) }
          : { ok: false, reason: verdict.reason, message: verdict.message.slice(0, 1000) };
        if (this.verdicts.size >= this.limit)
          this.verdicts.delete(this.verdicts.keys().next().value as string);
        this.verdicts.set(at, v);
      }
      signatures[c] = v;
    }
    return { signatures, keys };
  }
}
