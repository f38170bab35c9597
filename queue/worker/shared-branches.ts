/**
 * GitTargets by the repository branch they write (`<repository>@<branch>`, whichever GitProvider
 * names the repository), kept as GitTargets change and built again after a GitProvider changed.
 * A change of one GitTarget concerns every branch worker writing the same repository branch
 * (which of them holds a folder may move, queue/tenancy.ts). An informer's first list tells every
 * GitTarget one by one; finding each one's group here keeps that linear, where reading every
 * GitTarget's repository URL per change made it quadratic (10,000 GitTargets: minutes of CPU
 * before the worker took its first branch).
 */
import type { GitProvider, GitTarget } from "../crds/index.js";
import { repositoryOf } from "../tenancy.js";
import { GroupIndex } from "./group-index.js";

export interface SharedBranchSource {
  /** Every GitTarget, as the cache holds them. */
  targets(): GitTarget[];
  /** A GitTarget by namespace/name, as the cache holds it. */
  target(namespace: string, name: string): GitTarget | undefined;
  /** The GitProvider a GitTarget names, if the cache holds it. */
  provider(t: GitTarget): GitProvider | undefined;
}

const keyOf = (t: GitTarget) => `${t.metadata.namespace ?? "default"}/${t.metadata.name}`;

export class SharedBranchIndex {
  /** namespace/name of the GitTargets by place; undefined: to be built from the cache. */
  private groups: GroupIndex | undefined;
  /** A parsed GitProvider's repository, once per object (the cache keeps one object per version). */
  private readonly repositories = new WeakMap<GitProvider, string | undefined>();

  constructor(private readonly source: SharedBranchSource) {}

  /** The repository a GitProvider's URL names (queue/tenancy.ts repositoryOf), read once per object. */
  repositoryOf(p: GitProvider): string | undefined {
    if (!this.repositories.has(p)) this.repositories.set(p, repositoryOf(p.spec.url));
    return this.repositories.get(p);
  }

  /** The repository branch a GitTarget writes; undefined without its GitProvider or a repository URL. */
  placeOfTarget(t: GitTarget): string | undefined {
    const p = this.source.provider(t);
    const repo = p && this.repositoryOf(p);
    return repo === undefined ? undefined : `${repo}@${t.spec.branch}`;
  }

  /** A GitTarget was added or changed (`t`), or deleted (`t` undefined; `key` is namespace/name). */
  changed(key: string, t: GitTarget | undefined): void {
    this.groups?.set(key, t && this.placeOfTarget(t));
  }

  /** A GitProvider changed: any GitTarget may write another place now. */
  reset(): void {
    this.groups = undefined;
  }

  /** The GitTargets writing this repository branch. */
  at(place: string): GitTarget[] {
    this.groups ??= this.build();
    return this.groups.objects(place, (namespace, name) => this.source.target(namespace, name));
  }

  private build(): GroupIndex {
    const groups = new GroupIndex();
    for (const t of this.source.targets()) groups.set(keyOf(t), this.placeOfTarget(t));
    return groups;
  }
}
