/**
 * The HMAC key of each WebhookClaim, read from the Secret it names. Each Secret is watched by
 * name (a field selector `metadata.name=<name>`, never its namespace's other Secrets), so a
 * rotated key is used from the next request on, without a restart; a Secret no claim names any
 * longer is no longer watched.
 */
import { StatusReason } from "../../queue/crds/reasons.js";
import { apiFailure, type InformerHandle, type KObject, type Kube } from "../../queue/kube/index.js";

export type KeyRead =
  | { ok: true; key: string }
  | {
      ok: false;
      reason:
        | typeof StatusReason.SecretNotFound
        | typeof StatusReason.SecretKeyMissing
        | typeof StatusReason.SecretUnreadable;
      message: string;
    };

export class HmacKeys {
  private readonly watched = new Map<string, Promise<InformerHandle<KObject>>>();

  constructor(private readonly kube: Kube) {}

  /** The key as the Secret holds it now. */
  async read(namespace: string, name: string, key: string): Promise<KeyRead> {
    const h = await this.watch(namespace, name);
    if (!h.informer.isSynced()) {
      const f = apiFailure(h.informer.lastError ?? {});
      return {
        ok: false,
        reason: StatusReason.SecretUnreadable,
        message: `Secret ${namespace}/${name} cannot be read${f.code ? ` (${f.code})` : ""}: ${f.message}`,
      };
    }
    const s = h.informer.get(name, namespace) as { data?: Record<string, string> } | undefined;
    if (!s)
      return {
        ok: false,
        reason: StatusReason.SecretNotFound,
        message: `Secret ${namespace}/${name} does not exist`,
      };
    const b64 = s.data?.[key];
    if (!b64)
      return {
        ok: false,
        reason: StatusReason.SecretKeyMissing,
        message: `Secret ${namespace}/${name} has no key ${key}`,
      };
    return { ok: true, key: Buffer.from(b64, "base64").toString("utf8") };
  }

  private watch(namespace: string, name: string): Promise<InformerHandle<KObject>> {
    const id = `${namespace}/${name}`;
    let p = this.watched.get(id);
    if (!p) {
      const h = this.kube.secretInformer(namespace, name);
      p = h.informer.start().then(() => h);
      this.watched.set(id, p);
    }
    return p;
  }

  /** Stops watching every Secret not in `keep` (namespace/name). */
  async retain(keep: ReadonlySet<string>): Promise<void> {
    for (const [id, p] of [...this.watched]) {
      if (keep.has(id)) continue;
      this.watched.delete(id);
      await (await p).release();
    }
  }

  async close(): Promise<void> {
    await this.retain(new Set());
  }
}
