/**
 * WatchRule: what the watch plane mirrors into a GitTarget's folder. Namespaced: a rule names a
 * GitTarget of its own namespace and mirrors objects of that namespace. Other namespaces and
 * cluster-scoped kinds are mirrored only as far as the GitTarget's scope reaches, which only a
 * cluster administrator's ScopeGrant widens: a namespace editor's rule never does.
 */
import { z } from "zod";
import {
  ageColumn,
  conditions,
  type KindInfo,
  kindObject,
  namespaceName,
  objectName,
  observedGeneration,
  readyColumn,
  timestamp,
} from "./common.js";
import { checked, k8s } from "./k8s-ext.js";

export const WATCH_RULE_KIND = "WatchRule";
export const WATCH_RULE_PLURAL = "watchrules";

/** Condition types a WatchRule reports. */
export const WATCH_RULE_CONDITIONS = ["Ready", "KindsResolved"] as const;

export const PRUNE_MODES = ["OnEvent", "Always"] as const;
export type PruneMode = (typeof PRUNE_MODES)[number];

const groupName = z
  .string()
  .max(253)
  .regex(/^(|[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)$/)
  .describe('API group; "" for the core group.');

/** One kind to watch: by group/version/kind, or by group/version/resource (its plural). */
export const watchedKind = checked(
  checked(
    z.object({
      group: groupName,
      version: z
        .string()
        .min(1)
        .max(63)
        .regex(/^[a-z0-9]+$/)
        .describe("API version within the group, e.g. v1."),
      kind: z
        .string()
        .min(1)
        .max(63)
        .regex(/^[A-Za-z][A-Za-z0-9]*$/)
        .optional()
        .describe("Kind as written in objects (ConfigMap)."),
      resource: z
        .string()
        .min(1)
        .max(63)
        .regex(/^[a-z][a-z0-9]*$/)
        .optional()
        .describe("Resource (plural) as the API serves it (configmaps)."),
    }),
    {
      rule: "has(self.kind) != has(self.resource)",
      message: "exactly one of kind and resource",
      check: (k) => (k.kind === undefined) !== (k.resource === undefined),
    },
  ),
  {
    // The mirror never lists Secrets, whatever its RBAC: a Secret is never written to Git in clear text.
    rule: "!(self.group == '' && ((has(self.kind) && self.kind == 'Secret') || (has(self.resource) && self.resource == 'secrets')))",
    message: "Secrets are never mirrored: a Secret is never written to Git in clear text",
    check: (k) => !(k.group === "" && (k.kind === "Secret" || k.resource === "secrets")),
  },
).describe("A kind of object to mirror.");
export type WatchedKind = z.infer<typeof watchedKind>;

export const labelSelectorRequirement = z.object({
  key: z.string().min(1).max(317),
  operator: z.enum(["In", "NotIn", "Exists", "DoesNotExist"]),
  values: z.array(z.string().max(63)).optional(),
});

export const labelSelector = z
  .object({
    matchLabels: z.record(z.string().max(63)).optional(),
    matchExpressions: z.array(labelSelectorRequirement).optional(),
  })
  .describe("Only objects whose labels match (a Kubernetes label selector).");
export type LabelSelector = z.infer<typeof labelSelector>;

export const watchRuleSpec = z.object({
  targetRef: z
    .object({ name: objectName.describe("A GitTarget in the WatchRule's namespace.") })
    .describe("The GitTarget whose folder the mirrored objects are written to."),
  kinds: z.array(watchedKind).min(1).max(64).describe("The kinds mirrored."),
  namespaces: k8s(z.array(namespaceName), { listType: "set" })
    .optional()
    .describe(
      "Namespaces watched; defaults to the WatchRule's own. Another namespace is watched only while a ScopeGrant lets the GitTarget hold it.",
    ),
  selector: labelSelector.optional(),
  excludeFields: z
    .array(
      z
        .string()
        .min(1)
        .max(512)
        .regex(/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_./-]+)*$/),
    )
    .max(64)
    .optional()
    .describe("Dotted field paths left out of what is written (e.g. data.cache, metadata.labels.build)."),
  prune: z
    .object({
      mode: z
        .enum(PRUNE_MODES)
        .default("OnEvent")
        .describe(
          "OnEvent: a file is deleted from Git only on a watched delete. Always: a snapshot also deletes files of objects gone live.",
        ),
    })
    .optional(),
  suspend: z.boolean().optional().describe("Mirror nothing while true."),
});
export type WatchRuleSpec = z.infer<typeof watchRuleSpec>;
export type WatchRuleSpecInput = z.input<typeof watchRuleSpec>;

export const resolvedKind = z.object({
  group: z.string(),
  version: z.string(),
  kind: z.string(),
  resource: z.string(),
  namespaced: z.boolean(),
});

export const watchRuleStatus = z.object({
  conditions: conditions.optional(),
  observedGeneration: observedGeneration.optional(),
  resolvedKinds: z.array(resolvedKind).optional().describe("The kinds the API server serves, resolved."),
  unresolvedKinds: z
    .array(z.string())
    .optional()
    .describe(
      "Kinds not watched yet: not served by the API server (a CRD not installed), or their first list not landed yet: retried.",
    ),
  forbiddenKinds: z
    .array(z.string())
    .optional()
    .describe(
      "Kinds the mirror may not watch, with why: its RBAC does not let it list them (retried), or Secrets (never).",
    ),
  outOfScope: z
    .array(z.string())
    .optional()
    .describe(
      "Kinds and namespaces the rule names that its GitTarget may not hold: nothing there is looked at for the rule (a ScopeGrant widens the scope).",
    ),
  mirrored: z
    .number()
    .int()
    .min(0)
    .optional()
    .describe(
      "Watched writes handed to the branch worker since the mirror started: events, not objects (one object edited three times counts three).",
    ),
  refused: z
    .number()
    .int()
    .min(0)
    .optional()
    .describe("Writes refused (what the branch worker could not store)."),
  excluded: z
    .number()
    .int()
    .min(0)
    .optional()
    .describe("Objects left out: another applier's, controller-owned."),
  lastError: z.string().max(4000).optional(),
  lastErrorAt: timestamp.optional(),
});
export type WatchRuleStatus = z.infer<typeof watchRuleStatus>;

export const watchRule = kindObject(WATCH_RULE_KIND, watchRuleSpec, watchRuleStatus);
export type WatchRule = z.infer<typeof watchRule>;

export const watchRuleInfo: KindInfo = {
  kind: WATCH_RULE_KIND,
  plural: WATCH_RULE_PLURAL,
  singular: "watchrule",
  shortNames: ["wr"],
  description: "Selects the objects the watch plane mirrors into a GitTarget's folder.",
  spec: watchRuleSpec,
  status: watchRuleStatus,
  printerColumns: [
    readyColumn,
    { name: "Target", type: "string", jsonPath: ".spec.targetRef.name" },
    // A count of writes (events), not of objects: the column says so.
    {
      name: "Mirrored Writes",
      type: "integer",
      jsonPath: ".status.mirrored",
      description: "Watched writes handed to the branch worker (events, not objects).",
    },
    ageColumn,
  ],
};
