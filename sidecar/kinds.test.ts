import { describe, expect, expectTypeOf, it } from "vitest";
import { APPLIER_KINDS, type ApplierKind } from "../queue/contract.js";
import { RESOURCES } from "../queue/kube/index.js";
import type { ApplierDeps, ApplierKindModule, ApplierKindParts, SafetyChecks } from "./applier-kind.js";
import { KINDS, type KindEntry, type KindOptions, type SidecarApplier } from "./kinds.js";
import { ApplierNotAvailable, loadApplierKind } from "./main.js";

/** A third kind, as the webhook applier will be: its own settings, the shared checks required. */
interface WebhookOptions {
  url: string;
  timeoutMs?: number;
}
const webhook: ApplierKindModule<WebhookOptions> = {
  createApplierKind(deps) {
    expectTypeOf(deps.options.url).toEqualTypeOf<string>();
    expectTypeOf(deps.checks).toEqualTypeOf<SafetyChecks>();
    return {} as ApplierKindParts;
  },
};

describe("the applier-kind seam", () => {
  it("every registered kind is an ApplierKind, and loads its module with its claim type", async () => {
    for (const k of Object.keys(KINDS)) expect(APPLIER_KINDS).toContain(k as ApplierKind);
    expect(KINDS.flux.claimType).toBe(RESOURCES.fluxClaim);
    expect(KINDS.argocd.claimType).toBe(RESOURCES.argoCDClaim);
    expect(typeof (await loadApplierKind("flux")).createApplierKind).toBe("function");
    expect(typeof (await loadApplierKind("argocd")).createApplierKind).toBe("function");
    expect(KINDS.webhook.claimType).toBe(RESOURCES.webhookClaim);
    expect(typeof (await loadApplierKind("webhook")).createApplierKind).toBe("function");
  });

  it("a kind not in the registry is not available", async () => {
    const err = await loadApplierKind("jenkins" as SidecarApplier).catch((e) => e);
    expect(err).toBeInstanceOf(ApplierNotAvailable);
  });

  it("a third kind plugs in as one registry entry, typed by its own settings", () => {
    // The registry with the webhook kind added: the Flux and Argo CD entries are not touched.
    type Extended = KindOptions & { webhook: WebhookOptions };
    const entry: KindEntry<"flux"> & { load(): Promise<ApplierKindModule<Extended["webhook"]>> } = {
      claimType: RESOURCES.fluxClaim,
      load: async () => webhook,
    };
    expect(typeof entry.load).toBe("function");
    expectTypeOf<Extended["flux"]>().toEqualTypeOf<KindOptions["flux"]>();
    // A kind's settings are checked: the Flux kind takes no Argo CD setting...
    // @ts-expect-error watchKinds is not a Flux setting
    const wrong: KindOptions["flux"] = { watchKinds: [] };
    expect(wrong).toBeDefined();
    // ...and no kind can be built without the shared safety checks.
    type WithoutChecks = Omit<ApplierDeps<WebhookOptions>, "checks">;
    expectTypeOf<WithoutChecks>().not.toMatchTypeOf<ApplierDeps<WebhookOptions>>();
    expectTypeOf<SafetyChecks>().toHaveProperty("tip");
    expectTypeOf<SafetyChecks>().toHaveProperty("freshness");
    expectTypeOf<SafetyChecks>().toHaveProperty("standing");
  });
});
