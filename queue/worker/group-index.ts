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

  /** The keys of a group. */
  of(group: string): Iterable<string> {
    return this.members.get(group) ?? [];
  }
}

/** `namespace/name` split at its first slash. */
export function splitKey(key: string): { namespace: string; name: string } {
  const slash = key.indexOf("/");
  return { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
}
