/**
 * Claims by the applier they name (`<namespace>/<name>` of the Kustomization or Application), kept
 * as claims change. A change of an applier concerns the branches of the claims naming it; an
 * informer's first list of 5,000 Applications tells each one, and reading every claim's reference
 * per change made a replica's start quadratic (a standby's takeover of 1,000 branches spent most
 * of a minute there). A claim's reference is read once per change of the claim.
 */
import { applierRefOf } from "../kube/readers.js";
import { type KObject, objectKey } from "../kube/resources.js";

const nsOf = (o: { metadata: { namespace?: string } }) => o.metadata.namespace ?? "default";

export class ClaimsByApplier {
  /** Claim keys (objectKey) by applier; undefined: to be built from the informer's list. */
  private byApplier: Map<string, Set<string>> | undefined;
  private readonly applierOf = new Map<string, string>();

  constructor(
    private readonly claimKind: string,
    private readonly claims: {
      list(): KObject[];
      get(name: string, namespace?: string): KObject | undefined;
    },
  ) {}

  /** A claim was added or changed, or deleted. */
  changed(claim: KObject, deleted: boolean): void {
    if (!this.byApplier) return;
    const key = objectKey(claim);
    const old = this.applierOf.get(key);
    if (old !== undefined) {
      const group = this.byApplier.get(old);
      group?.delete(key);
      if (group?.size === 0) this.byApplier.delete(old);
      this.applierOf.delete(key);
    }
    if (!deleted) this.add(this.byApplier, claim);
  }

  /** The claims naming the applier `namespace/name`, as the informer holds them. */
  naming(namespace: string, name: string): KObject[] {
    this.byApplier ??= this.build();
    const out: KObject[] = [];
    for (const key of this.byApplier.get(`${namespace}/${name}`) ?? []) {
      const slash = key.indexOf("/");
      const c = this.claims.get(key.slice(slash + 1), key.slice(0, slash));
      if (c) out.push(c);
    }
    return out;
  }

  private build(): Map<string, Set<string>> {
    const byApplier = new Map<string, Set<string>>();
    this.applierOf.clear();
    for (const c of this.claims.list()) this.add(byApplier, c);
    return byApplier;
  }

  private add(byApplier: Map<string, Set<string>>, claim: KObject): void {
    const ref = applierRefOf(this.claimKind, claim);
    if (!ref) return;
    const applier = `${ref.namespace ?? nsOf(claim)}/${ref.name}`;
    const key = objectKey(claim);
    let group = byApplier.get(applier);
    if (!group) byApplier.set(applier, (group = new Set()));
    group.add(key);
    this.applierOf.set(key, applier);
  }
}
