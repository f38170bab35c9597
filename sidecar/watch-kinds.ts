/** The kinds a window observer watches for its applier's writes (`--watch-kinds`). */
import type { InformerHandle, KObject, Kube } from "../queue/kube/index.js";
import type { Logger } from "../queue/log.js";

export interface WatchedKind {
  apiVersion: string;
  kind: string;
}

/**
 * Not Secrets: a watch keeps every object of its kind in the cluster in memory, and clusters hold
 * many large Secrets (Helm keeps each release in one). Add `v1/Secret` with --watch-kinds when
 * Applications apply Secrets whose writes must be told from edits, and size the limit for it.
 */
export const DEFAULT_WATCHED_KINDS: WatchedKind[] = [
  { apiVersion: "v1", kind: "ConfigMap" },
  { apiVersion: "v1", kind: "Service" },
  { apiVersion: "apps/v1", kind: "Deployment" },
];

/** `--watch-kinds`: `apiVersion/Kind` items separated by commas (`v1/ConfigMap,apps/v1/Deployment`), or `none`. */
export function parseWatchKinds(raw: string): WatchedKind[] {
  if (raw.trim() === "none") return [];
  return raw.split(",").map((item) => {
    const t = item.trim();
    const slash = t.lastIndexOf("/");
    const apiVersion = t.slice(0, slash);
    const kind = t.slice(slash + 1);
    if (
      slash <= 0 ||
      !/^[A-Z][A-Za-z0-9]*$/.test(kind) ||
      !/^([a-z0-9.-]+\/)?v[0-9][a-z0-9]*$/.test(apiVersion)
    )
      throw new Error(
        `expected apiVersion/Kind items like v1/ConfigMap or apps/v1/Deployment, or none; got "${t}"`,
      );
    return { apiVersion, kind };
  });
}

/**
 * Watches each kind (one informer each, started together) and hands every create or update to
 * `onWrite` with the object's managedFields as last seen, a write's proof; `remember` (truthy) says whose
 * managedFields to keep. A kind the cluster does not serve is logged and left out.
 */
export async function watchWrites<T extends { metadata: { uid?: string; managedFields?: unknown[] } }>(
  kube: Kube,
  kinds: readonly WatchedKind[],
  log: Logger,
  onWrite: (obj: T, previous: unknown[] | undefined) => void,
  remember: (obj: T) => unknown = () => true,
): Promise<InformerHandle<KObject>[]> {
  const last = new Map<string, unknown[]>();
  const handles: InformerHandle<KObject>[] = [];
  for (const k of kinds) {
    const handle = await kube.objectInformer<KObject>(k.apiVersion, k.kind, undefined, (type, obj) => {
      const uid = obj.metadata?.uid;
      if (type === "delete") {
        if (uid) last.delete(uid);
        return;
      }
      const o = { apiVersion: k.apiVersion, kind: k.kind, ...obj } as unknown as T;
      const previous = uid ? last.get(uid) : undefined;
      if (uid && remember(o)) last.set(uid, o.metadata.managedFields ?? []);
      onWrite(o, previous);
    });
    if (!handle) {
      log.warn({ kind: `${k.apiVersion}/${k.kind}` }, "the cluster does not serve this kind; not watched");
      continue;
    }
    kindOf.set(handle, k);
    handles.push(handle);
  }
  await Promise.all(handles.map((w) => w.informer.start()));
  return handles;
}

/** The kind each handle `watchWrites` made watches (its informer's objects carry none). */
const kindOf = new WeakMap<InformerHandle<KObject>, WatchedKind>();

/** Every object the watches of `watchWrites` hold now, with its kind: a window judging them as listed. */
export function listedObjects<T>(handles: readonly InformerHandle<KObject>[]): T[] {
  return handles.flatMap((h) => {
    const k = kindOf.get(h);
    if (!k || !h.informer.isSynced()) return [];
    return h.informer
      .list()
      .map((obj) => ({ apiVersion: k.apiVersion, kind: k.kind, ...obj }) as unknown as T);
  });
}
