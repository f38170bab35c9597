import { describe, expect, it } from "vitest";
import type { ApplierRef } from "../../queue/contract.js";
import { excludingOwner, ownerOf } from "./ownership.js";

const flux: ApplierRef = { kind: "flux", namespace: "flux-system", name: "apps" };
const argo: ApplierRef = { kind: "argocd", namespace: "argocd", name: "web" };
const fluxOwned = (name: string) => ({
  metadata: {
    labels: {
      "kustomize.toolkit.fluxcd.io/name": name,
      "kustomize.toolkit.fluxcd.io/namespace": "flux-system",
    },
  },
});
const argoOwned = (app: string) => ({
  metadata: { annotations: { "argocd.argoproj.io/tracking-id": `${app}:/ConfigMap:team/c` } },
});

describe("another applier's objects", () => {
  it("reads Flux's owner labels first, then Argo CD's tracking annotation", () => {
    expect(ownerOf(fluxOwned("apps"))).toEqual({ kind: "flux", namespace: "flux-system", name: "apps" });
    expect(ownerOf(argoOwned("team_web"))).toEqual({ kind: "argocd", app: "team_web" });
    expect(ownerOf({ metadata: {} })).toBeNull();
  });

  it("excludes an object another applier owns, never the folder's own applier's or nobody's", () => {
    expect(excludingOwner(fluxOwned("other"), flux)).toEqual({
      kind: "flux",
      namespace: "flux-system",
      name: "other",
    });
    expect(excludingOwner(fluxOwned("apps"), flux)).toBeNull();
    expect(excludingOwner({ metadata: {} }, flux)).toBeNull();
    expect(excludingOwner(argoOwned("web"), argo)).toBeNull();
    expect(excludingOwner(argoOwned("argocd_web"), argo)).toBeNull();
    expect(excludingOwner(argoOwned("web"), flux)).toEqual({ kind: "argocd", app: "web" });
    expect(excludingOwner(fluxOwned("apps"), argo)).not.toBeNull();
  });

  it("a folder no applier applies excludes nothing", () => {
    expect(excludingOwner(fluxOwned("other"), null)).toBeNull();
  });
});
