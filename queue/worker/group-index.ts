/**
 * Keys grouped by one value each (GitTargets by the repository branch they write, claims by the
 * applier they name), kept as keys move: a group's members are one map read, where scanning every
 * object per change makes a first listing of many objects quadratic.
 */
export class GroupIndex {
  private readonly members = new Map<string, Set<string>>();
  private readonly groupOf = new Map<string, string>();

  /** Puts the key in this group, out of any other; undefined: in none. */
  set(key: string, group: string | undefined): void {
    const old = this.groupOf.get(key);
    if (old === group) return;
    if (old !== undefined) {
      const set = this.members.get(old);
      set?.delete(key);
      if (set?.size === 0) this.members.delete(old);
      this.groupOf.delete(key);
    }
    if (group === undefined) return;
    let set = this.members.get(group);
    if (!set) this.members.set(group, (set = new Set()));
    set.add(key);
    this.groupOf.set(key, group);
  }

  /**
   * The objects of a group, each key (`namespace/name`) looked up in the cache that holds them;
   * one the cache no longer holds is left out.
   */
  objects<T>(group: string, get: (namespace: string, name: string) => T | undefined): T[] {
    const out: T[] = [];
    for (const key of this.members.get(group) ?? []) {
      const slash = key.indexOf("/");
      const o = get(key.slice(0, slash), key.slice(slash + 1));
      if (o !== undefined) out.push(o);
    }
    return out;
  }
}
