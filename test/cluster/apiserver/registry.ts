/**
 * The resources the server serves: built-in kinds, plus whatever installed CRDs declare. Also the
 * legacy discovery documents built from them.
 */
import { RE2JS } from "re2js";
import { errorMessage } from "../../../queue/errors.js";
import { errors } from "./errors.js";
import {
  CORE_EVENT_FIELDS,
  CORE_EVENT_TABLE,
  coreEventShape,
  eventFromCore,
  eventToCore,
  V1_EVENT_FIELDS,
  V1_EVENT_TABLE,
  v1EventShape,
} from "./events.js";
import { mergeSchemaOf } from "./merge-schemas.js";
import type { KObject, PrinterColumn, ResourceType, ScaleSubresource, SchemaNode } from "./types.js";
import { apiVersionOf } from "./types.js";

const allVerbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

function builtin(
  t: Partial<ResourceType> & Pick<ResourceType, "group" | "version" | "plural" | "kind">,
): ResourceType {
  const mergeSchema = mergeSchemaOf(t.group, t.version, t.kind);
  return {
    ...(mergeSchema ? { mergeSchema } : {}),
    singular: t.kind.toLowerCase(),
    listKind: `${t.kind}List`,
    namespaced: true,
    shortNames: [],
    categories: [],
    verbs: allVerbs,
    statusSubresource: false,
    hasGeneration: false,
    printerColumns: [],
    ...t,
  };
}

/** Deployments and StatefulSets: replicas in spec and status, the selector a label selector. */
const workloadScale: ScaleSubresource = {
  specReplicasPath: ".spec.replicas",
  statusReplicasPath: ".status.replicas",
  labelSelectorPath: ".spec.selector",
};

const builtins: ResourceType[] = [
  builtin({
    group: "",
    version: "v1",
    plural: "namespaces",
    kind: "Namespace",
    namespaced: false,
    shortNames: ["ns"],
    statusSubresource: true,
    verbs: ["create", "delete", "get", "list", "patch", "update", "watch"],
    printerColumns: [{ name: "Status", type: "string", jsonPath: ".status.phase" }],
  }),
  builtin({ group: "", version: "v1", plural: "configmaps", kind: "ConfigMap", shortNames: ["cm"] }),
  builtin({
    group: "",
    version: "v1",
    plural: "secrets",
    kind: "Secret",
    printerColumns: [{ name: "Type", type: "string", jsonPath: ".type" }],
  }),
  builtin({
    group: "",
    version: "v1",
    plural: "serviceaccounts",
    kind: "ServiceAccount",
    shortNames: ["sa"],
  }),
  builtin({
    group: "",
    version: "v1",
    plural: "events",
    kind: "Event",
    shortNames: ["ev"],
    encode: coreEventShape,
    table: CORE_EVENT_TABLE,
    fieldLabels: CORE_EVENT_FIELDS,
  }),
  // The same Events as core v1 (one storage, converted each way), as on a real API server.
  builtin({
    group: "events.k8s.io",
    version: "v1",
    plural: "events",
    kind: "Event",
    shortNames: ["ev"],
    encode: v1EventShape,
    table: V1_EVENT_TABLE,
    storage: { key: "/events", fromStored: eventFromCore, toStored: eventToCore },
    fieldLabels: V1_EVENT_FIELDS,
  }),
  // Workloads and the rest of what manifests hold (no controller runs them): Deployments and
  // StatefulSets defaulted as kube-apiserver defaults them (defaults.ts), the rest stored as given.
  builtin({
    group: "apps",
    version: "v1",
    plural: "deployments",
    kind: "Deployment",
    shortNames: ["deploy"],
    categories: ["all"],
    statusSubresource: true,
    hasGeneration: true,
    scale: workloadScale,
    printerColumns: [
      { name: "Ready", type: "string", jsonPath: ".status.readyReplicas" },
      { name: "Up-to-date", type: "integer", jsonPath: ".status.updatedReplicas" },
      { name: "Available", type: "integer", jsonPath: ".status.availableReplicas" },
    ],
  }),
  builtin({
    group: "apps",
    version: "v1",
    plural: "statefulsets",
    kind: "StatefulSet",
    shortNames: ["sts"],
    categories: ["all"],
    statusSubresource: true,
    hasGeneration: true,
    scale: workloadScale,
    printerColumns: [{ name: "Ready", type: "string", jsonPath: ".status.readyReplicas" }],
  }),
  builtin({
    group: "",
    version: "v1",
    plural: "services",
    kind: "Service",
    shortNames: ["svc"],
    categories: ["all"],
    statusSubresource: true,
    printerColumns: [
      { name: "Type", type: "string", jsonPath: ".spec.type" },
      { name: "Cluster-IP", type: "string", jsonPath: ".spec.clusterIP" },
    ],
  }),
  builtin({
    group: "networking.k8s.io",
    version: "v1",
    plural: "networkpolicies",
    kind: "NetworkPolicy",
    shortNames: ["netpol"],
    hasGeneration: true,
  }),
  builtin({
    group: "policy",
    version: "v1",
    plural: "poddisruptionbudgets",
    kind: "PodDisruptionBudget",
    shortNames: ["pdb"],
    statusSubresource: true,
    hasGeneration: true,
  }),
  builtin({
    group: "coordination.k8s.io",
    version: "v1",
    plural: "leases",
    kind: "Lease",
    printerColumns: [{ name: "Holder", type: "string", jsonPath: ".spec.holderIdentity" }],
  }),
  ...(["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"] as const).map((kind) =>
    builtin({
      group: "rbac.authorization.k8s.io",
      version: "v1",
      plural: `${kind.toLowerCase()}s`,
      kind,
      namespaced: !kind.startsWith("Cluster"),
    }),
  ),
  // Admission configuration: stored, and evaluated on every write (admission.ts).
  ...(
    [
      ["ValidatingAdmissionPolicy", "validatingadmissionpolicies"],
      ["ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings"],
    ] as const
  ).map(([kind, plural]) =>
    builtin({
      group: "admissionregistration.k8s.io",
      version: "v1",
      plural,
      kind,
      namespaced: false,
      hasGeneration: true,
      statusSubresource: kind === "ValidatingAdmissionPolicy",
    }),
  ),
  builtin({
    group: "apiextensions.k8s.io",
    version: "v1",
    plural: "customresourcedefinitions",
    kind: "CustomResourceDefinition",
    namespaced: false,
    shortNames: ["crd", "crds"],
    categories: ["api-extensions"],
    statusSubresource: true,
    hasGeneration: true,
    printerColumns: [{ name: "Created At", type: "date", jsonPath: ".metadata.creationTimestamp" }],
  }),
];

export const typeKeyOf = (t: Pick<ResourceType, "group" | "plural">) => `${t.group}/${t.plural}`;

/** Where a type's objects are stored: its own typeKey, or the one it is a view of. */
export const storageKeyOf = (t: ResourceType) => t.storage?.key ?? typeKeyOf(t);

/** A stored object as the type serves it (its own apiVersion, converted where it is a view). */
export function servedShape(t: ResourceType, stored: KObject): KObject {
  const viewed = t.storage ? t.storage.fromStored(stored) : stored;
  const o = t.encode ? t.encode(viewed) : viewed;
  o.apiVersion = apiVersionOf(t);
  return o;
}

/** An object of the served shape as it is stored. */
export function storedShape(t: ResourceType, served: KObject): KObject {
  return t.storage ? t.storage.toStored(served) : served;
}

interface CrdSpec {
  group: string;
  scope: "Namespaced" | "Cluster";
  names: {
    plural: string;
    singular?: string;
    kind: string;
    listKind?: string;
    shortNames?: string[];
    categories?: string[];
  };
  versions: {
    name: string;
    served: boolean;
    storage?: boolean;
    schema?: { openAPIV3Schema?: SchemaNode };
    subresources?: { status?: object; scale?: ScaleSubresource };
    additionalPrinterColumns?: PrinterColumn[];
  }[];
}

/** The resource types a CRD object declares (one per served version). */
export function typesFromCrd(crd: KObject): ResourceType[] {
  const spec = crd.spec as CrdSpec;
  return spec.versions
    .filter((v) => v.served)
    .map((v) => ({
      group: spec.group,
      version: v.name,
      plural: spec.names.plural,
      singular: spec.names.singular ?? spec.names.kind.toLowerCase(),
      kind: spec.names.kind,
      listKind: spec.names.listKind ?? `${spec.names.kind}List`,
      namespaced: spec.scope === "Namespaced",
      shortNames: spec.names.shortNames ?? [],
      categories: spec.names.categories ?? [],
      verbs: allVerbs,
      statusSubresource: v.subresources?.status !== undefined,
      ...(v.subresources?.scale ? { scale: v.subresources.scale } : {}),
      hasGeneration: true,
      schema: v.schema?.openAPIV3Schema,
      printerColumns: v.additionalPrinterColumns ?? [
        { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
      ],
      crdName: crd.metadata.name,
    }));
}

/**
 * Every `pattern` of the versions' schemas compiled as the real server compiles it, with Go's
 * regexp (RE2: no lookaround, no backreferences); one it cannot compile refuses the whole CRD. The
 * field is named as the real server names it: under spec.validation when every version has the
 * same schema (it keeps one copy then), else under the version's own.
 */
function patternCauses(versions: CrdSpec["versions"]): { field: string; message: string }[] {
  const schemas = versions.map((v) => v.schema?.openAPIV3Schema);
  const same = schemas.every((x) => JSON.stringify(x) === JSON.stringify(schemas[0]));
  const roots = same
    ? [{ at: "spec.validation.openAPIV3Schema", schema: schemas[0] }]
    : schemas.map((schema, i) => ({ at: `spec.versions[${i}].schema.openAPIV3Schema`, schema }));
  const causes: { field: string; message: string }[] = [];
  const walk = (node: SchemaNode | undefined, at: string): void => {
    if (!node || typeof node !== "object") return;
    if (typeof node.pattern === "string") {
      try {
        RE2JS.compile(node.pattern);
      } catch (err) {
        causes.push({
          field: `${at}.pattern`,
          message: `Invalid value: ${JSON.stringify(node.pattern)}: must be a valid regular expression, but isn't: ${errorMessage(err)}`,
        });
      }
    }
    for (const [name, child] of Object.entries(node.properties ?? {}))
      walk(child, `${at}.properties[${name}]`);
    if (node.items && typeof node.items === "object") walk(node.items as SchemaNode, `${at}.items`);
    if (node.additionalProperties && typeof node.additionalProperties === "object")
      walk(node.additionalProperties as SchemaNode, `${at}.additionalProperties`);
    for (const key of ["allOf", "anyOf", "oneOf"] as const) {
      const list = (node as Record<string, unknown>)[key] as SchemaNode[] | undefined;
      for (const [i, c] of (list ?? []).entries()) walk(c, `${at}.${key}[${i}]`);
    }
  };
  for (const r of roots) walk(r.schema, r.at);
  return causes;
}

/** Checks the parts of a CRD we rely on; a bad one is refused like the real server would. */
export function validateCrd(crd: KObject): void {
  const spec = crd.spec as Partial<CrdSpec> | undefined;
  const causes: { field: string; message: string }[] = [];
  if (!spec?.group) causes.push({ field: "spec.group", message: "Required value" });
  if (!spec?.names?.plural) causes.push({ field: "spec.names.plural", message: "Required value" });
  if (!spec?.names?.kind) causes.push({ field: "spec.names.kind", message: "Required value" });
  if (spec?.scope !== "Namespaced" && spec?.scope !== "Cluster")
    causes.push({ field: "spec.scope", message: 'Unsupported value: must be "Namespaced" or "Cluster"' });
  if (!spec?.versions?.length) causes.push({ field: "spec.versions", message: "Required value" });
  if (spec?.group && spec.names?.plural && crd.metadata.name !== `${spec.names.plural}.${spec.group}`)
    causes.push({ field: "metadata.name", message: `must be spec.names.plural+"."+spec.group` });
  causes.push(...patternCauses(spec?.versions ?? []));
  if (causes.length)
    throw errors.invalid(
      {
        group: "apiextensions.k8s.io",
        plural: "customresourcedefinitions",
        kind: "CustomResourceDefinition",
        name: crd.metadata.name ?? "",
      },
      causes,
    );
}

export class Registry {
  private types: ResourceType[] = [...builtins];

  all(): ResourceType[] {
    return this.types;
  }

  find(group: string, version: string, plural: string): ResourceType | undefined {
    return this.types.find((t) => t.group === group && t.version === version && t.plural === plural);
  }

  /** Replaces whatever a CRD served before with what it declares now. */
  setCrd(crd: KObject): void {
    this.removeCrd(crd.metadata.name!);
    this.types.push(...typesFromCrd(crd));
  }

  removeCrd(name: string): void {
    this.types = this.types.filter((t) => t.crdName !== name);
  }

  groupVersions(): Map<string, string[]> {
    const byGroup = new Map<string, string[]>();
    for (const t of this.types) {
      if (t.group === "") continue;
      const versions = byGroup.get(t.group) ?? [];
      if (!versions.includes(t.version)) versions.push(t.version);
      byGroup.set(t.group, versions);
    }
    return byGroup;
  }

  apiVersions() {
    return {
      kind: "APIVersions",
      versions: ["v1"],
      serverAddressByClientCIDRs: [{ clientCIDR: "0.0.0.0/0", serverAddress: "127.0.0.1" }],
    };
  }

  apiGroupList() {
    return {
      kind: "APIGroupList",
      apiVersion: "v1",
      groups: [...this.groupVersions()].map(([name, versions]) => this.apiGroup(name, versions)),
    };
  }

  apiGroup(name: string, versions = this.groupVersions().get(name)) {
    if (!versions) return undefined;
    const gv = versions.map((v) => ({ groupVersion: `${name}/${v}`, version: v }));
    return { kind: "APIGroup", apiVersion: "v1", name, versions: gv, preferredVersion: gv[0] };
  }

  resourceList(group: string, version: string) {
    const served = this.types.filter((t) => t.group === group && t.version === version);
    if (served.length === 0) return undefined;
    const resources: object[] = [];
    for (const t of served) {
      resources.push({
        name: t.plural,
        singularName: t.singular,
        namespaced: t.namespaced,
        kind: t.kind,
        verbs: t.verbs,
        ...(t.shortNames.length ? { shortNames: t.shortNames } : {}),
        ...(t.categories.length ? { categories: t.categories } : {}),
      });
      if (t.statusSubresource)
        resources.push({
          name: `${t.plural}/status`,
          singularName: "",
          namespaced: t.namespaced,
          kind: t.kind,
          verbs: ["get", "patch", "update"],
        });
      if (t.scale)
        resources.push({
          name: `${t.plural}/scale`,
          singularName: "",
          namespaced: t.namespaced,
          group: "autoscaling",
          version: "v1",
          kind: "Scale",
          verbs: ["get", "patch", "update"],
        });
    }
    return {
      kind: "APIResourceList",
      apiVersion: "v1",
      groupVersion: apiVersionOf({ group, version }),
      resources,
    };
  }
}
