/**
 * The newest resourceVersion this process has seen of each object, from the answers to its own
 * reads and writes. A watch cache holding that version has caught up with everything the process
 * knows of the object (its own writes included), so a decision may be taken on it instead of on
 * a read of its own; a cache holding any other version is read past.
 */
import type { KObject, ResourceType } from "./resources.js";

/** How many objects are remembered (the oldest forgotten first: then a read is taken again). */
const REMEMBERED = 20_000;

export class SeenVersions {
  private readonly versions = new Map<string, string>();

  constructor(private readonly size = REMEMBERED) {}

  /** Records an answer: the object as it is (its version), or undefined when it does not exist. */
  saw(t: ResourceType, namespace: string, name: string, answer: KObject | undefined): void {
    const key = keyOf(t, namespace, name);
    this.versions.delete(key);
    const version = answer?.metadata?.resourceVersion;
    // An answer with the deletion under way and no finalizer left is the object's last version:
    // it is gone, whatever a cache still holds.
    const gone = answer?.metadata.deletionTimestamp && !answer.metadata.finalizers?.length;
    if (version === undefined || gone) return;
    this.versions.set(key, version);
    if (this.versions.size > this.size) this.versions.delete(this.versions.keys().next().value as string);
  }

  /** Whether `cached` is the newest version of the object seen here (false when none was seen). */
  current(t: ResourceType, cached: KObject | undefined): boolean {
    if (!cached?.metadata.resourceVersion) return false;
    const seen = this.versions.get(keyOf(t, cached.metadata.namespace ?? "", cached.metadata.name));
    return seen === cached.metadata.resourceVersion;
  }
}

const keyOf = (t: ResourceType, namespace: string, name: string) =>
  `${t.group}/${t.plural}/${namespace}/${name}`;
