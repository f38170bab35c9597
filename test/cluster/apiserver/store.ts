/**
 * In-memory object storage with one global resourceVersion counter, a bounded history of
 * changes for watches to resume from, and subscribers that hear every change.
 */

import { clone } from "./clone.js";
import { errors } from "./errors.js";
import type { KObject } from "./types.js";

export type EventType = "ADDED" | "MODIFIED" | "DELETED";

export interface Change {
  type: EventType;
  /** group/plural of the resource, shared by all its versions */
  typeKey: string;
  rv: number;
  object: KObject;
  /** the object before this change (for watches whose selector it used to match) */
  previous?: KObject;
}

export type Listener = (change: Change) => void;

const objectKey = (namespace: string | undefined, name: string) => `${namespace ?? ""}/${name}`;

export class Store {
  private rv = 0;
  private readonly objects = new Map<string, Map<string, KObject>>();
  private history: Change[] = [];
  /** Watches may resume from any resourceVersion >= this one. */
  private oldestResumable = 0;
  private readonly listeners = new Set<Listener>();

  constructor(private readonly historyLimit: number) {}

  currentRv(): number {
    return this.rv;
  }

  nextRv(): number {
    return ++this.rv;
  }

  get(typeKey: string, namespace: string | undefined, name: string): KObject | undefined {
    const o = this.objects.get(typeKey)?.get(objectKey(namespace, name));
    return o ? clone(o) : undefined;
  }

  /** All objects of a type, optionally in one namespace, sorted by namespace then name. */
  list(typeKey: string, namespace?: string): KObject[] {
    const all = [...(this.objects.get(typeKey)?.entries() ?? [])]
      .filter(([, o]) => namespace === undefined || o.metadata.namespace === namespace)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return all.map(([, o]) => clone(o));
  }

  /** Every object in a namespace, any type (for namespace deletion). */
  inNamespace(namespace: string): { typeKey: string; object: KObject }[] {
    const out: { typeKey: string; object: KObject }[] = [];
    for (const [typeKey, objs] of this.objects) {
      for (const o of objs.values()) {
        if (o.metadata.namespace === namespace) out.push({ typeKey, object: clone(o) });
      }
    }
    return out;
  }

  /** Every object that lists `uid` among its owners. */
  dependentsOf(uid: string): { typeKey: string; object: KObject }[] {
    const out: { typeKey: string; object: KObject }[] = [];
    for (const [typeKey, objs] of this.objects) {
      for (const o of objs.values()) {
        if (o.metadata.ownerReferences?.some((r) => r.uid === uid)) out.push({ typeKey, object: clone(o) });
      }
    }
    return out;
  }

  /** Stores a new or changed object under a fresh resourceVersion and tells every listener. */
  put(typeKey: string, object: KObject, previous: KObject | undefined): KObject {
    const stored = clone(object);
    const rv = this.nextRv();
    stored.metadata.resourceVersion = String(rv);
    let bucket = this.objects.get(typeKey);
    if (!bucket) this.objects.set(typeKey, (bucket = new Map()));
    bucket.set(objectKey(stored.metadata.namespace, stored.metadata.name!), stored);
    this.record({ type: previous ? "MODIFIED" : "ADDED", typeKey, rv, object: stored, previous });
    return clone(stored);
  }

  remove(typeKey: string, object: KObject): KObject {
    const bucket = this.objects.get(typeKey);
    const key = objectKey(object.metadata.namespace, object.metadata.name!);
    const previous = bucket?.get(key);
    if (!previous)
      throw errors.notFound({
        group: typeKey.split("/")[0]!,
        plural: typeKey.split("/")[1]!,
        name: object.metadata.name!,
      });
    bucket!.delete(key);
    const rv = this.nextRv();
    const gone = clone(previous);
    gone.metadata.resourceVersion = String(rv);
    this.record({ type: "DELETED", typeKey, rv, object: gone, previous });
    return clone(gone);
  }

  /** Drops every object of a type (its CRD was deleted), with DELETED events. */
  dropType(typeKey: string): void {
    for (const o of this.list(typeKey)) this.remove(typeKey, o);
    this.objects.delete(typeKey);
  }

  private record(change: Change): void {
    this.history.push(change);
    if (this.history.length > this.historyLimit) {
      const dropped = this.history.splice(0, this.history.length - this.historyLimit);
      this.oldestResumable = dropped[dropped.length - 1]!.rv;
    }
    for (const l of this.listeners) l(change);
  }

  /**
   * Changes after `rv`, or undefined when `rv` is older than the history kept (the caller answers
   * 410 Gone, as the real server does once etcd has compacted).
   */
  changesSince(rv: number): Change[] | undefined {
    if (rv < this.oldestResumable) return undefined;
    return this.history.filter((c) => c.rv > rv);
  }

  /** Forgets all history: every resourceVersion before now becomes too old to watch from. */
  compact(): void {
    this.history = [];
    this.oldestResumable = this.rv;
  }

  subscribe(l: Listener): () => void {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  }
}
