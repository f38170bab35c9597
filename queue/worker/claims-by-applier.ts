/**
 * Claims by the applier they name (`<namespace>/<name>` of the Kustomization or Application), kept
 * as claims change. A change of an applier concerns the branches of the claims naming it; an
 * informer's first list of 5,000 Applications tells each one, and reading every claim's reference
 * per change made a replica's start quadratic (a standby's takeover of 1,000 branches spent most
 * of a minute there). A claim's reference is read once per change of the claim.
 */
import { applierRefOf } from "../kube/readers.js";
import { type KObject, objectKey } from "../kube/resources.js";
import { GroupIndex } from "./group-index.js";

const nsOf = (o: { metadata: { namespace?: string } }) => o.metadata.namespace ?? "default";

export class ClaimsByApplier {
  /** Claim keys (objectKey) by applier; undefined: to be built from the informer's list. */
  private byApplier: GroupIndex | undefined;

  constructor(
    private readonly claimKind: string,
    private readonly claims: {
      list(): KObject[];
      get(name: string, namespace?: string): KObject | undefined;
    },
  ) {}

  /** A claim was added or changed, or deleted. */
  changed(claim: KObject, deleted: boolean): void {
    this.byApplier?.set(objectKey(claim), deleted ? undefined : this.applierOf(claim));
  }

  /** The claims naming the applier `namespace/name`, as the informer holds them. */
  naming(namespace: string, name: string): KObject[] {
    this.byApplier ??= this.build();
    return this.byApplier.objects(`${namespace}/${name}`, (ns, n) => this.claims.get(n, ns));
  }

  private build(): GroupIndex {
    const byApplier = new GroupIndex();
    for (const c of this.claims.list()) byApplier.set(objectKey(c), this.applierOf(c));
    return byApplier;
  }

  private applierOf(claim: KObject): string | undefined {
    const ref = applierRefOf(this.claimKind, claim);
    return ref ? `${ref.namespace ?? nsOf(claim)}/${ref.name}` : undefined;
  }
}
