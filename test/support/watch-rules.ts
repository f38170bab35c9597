/** Fixtures of the watch plane's unit tests (sidecar/mirror/*.test.ts): core kinds as resolved, and WatchRules. */
import type { WatchRule } from "../../queue/crds/index.js";
import type { ResolvedKind } from "../../sidecar/mirror/rules.js";

/** A kind of the core API group (v1) as discovery resolves it. */
const core = (kind: string, resource: string, namespaced: boolean): ResolvedKind => ({
  group: "",
  version: "v1",
  kind,
  resource,
  namespaced,
});

export const CONFIG_MAP = core("ConfigMap", "configmaps", true);
export const SECRET = core("Secret", "secrets", true);
export const NAMESPACE = core("Namespace", "namespaces", false);

/** The WatchRule `team/r` of GitTarget `site`, selecting ConfigMaps unless `spec` says otherwise. */
export const watchRule = (spec: Partial<WatchRule["spec"]> = {}): WatchRule => ({
  apiVersion: "applygate.dev/v1alpha1",
  kind: "WatchRule",
  metadata: { name: "r", namespace: "team" },
  spec: { targetRef: { name: "site" }, kinds: [{ group: "", version: "v1", kind: "ConfigMap" }], ...spec },
});
