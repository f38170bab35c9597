/**
 * The playground reads who runs as what from the manifests' build when kubectl is on PATH, and
 * from a snapshot of it otherwise; the snapshot must say what the manifests say.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { KUBECTL_AVAILABLE } from "../manifests/kustomize.js";
import { buildDeployed, SNAPSHOT } from "./identities.js";

describe.skipIf(!KUBECTL_AVAILABLE)("the deployed identities snapshot", () => {
  it("equals a fresh build of the overlays (run `npm run gen:deployed` after changing RBAC)", () => {
    expect(JSON.parse(readFileSync(SNAPSHOT, "utf8"))).toEqual(buildDeployed());
  });
});
