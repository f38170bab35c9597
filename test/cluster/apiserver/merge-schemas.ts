/**
 * How server-side apply and managedFields see the built-in kinds the server stores: which lists
 * are maps keyed by which fields, which maps and structs are atomic. Taken from the markers of
 * k8s.io/api (`+listType`, `+listMapKey`, `+mapType`, `+structType`, as the real server's OpenAPI
 * carries them in `x-kubernetes-*`). Only merge semantics: no types, nothing closed, never used for
 * validation or pruning. A field not named here is what structured-merge-diff makes of a field
 * it has no schema for: a map merged key by key, a list atomic.
 */
import type { SchemaNode } from "./types.js";

const atomic: SchemaNode = { type: "object", "x-kubernetes-map-type": "atomic" };
const obj = (properties: Record<string, SchemaNode>): SchemaNode => ({ type: "object", properties });
const listMap = (keys: string[], properties: Record<string, SchemaNode> = {}): SchemaNode => ({
  type: "array",
  "x-kubernetes-list-type": "map",
  "x-kubernetes-list-map-keys": keys,
  items: obj(properties),
});

/** A protocol left out is TCP, in the key of a port list as in the object. */
const protocol: SchemaNode = { type: "string", default: "TCP" };

/** LabelSelector: atomic (a selector is replaced whole, never merged). */
const labelSelector = atomic;

const container = {
  ports: listMap(["containerPort", "protocol"], { protocol }),
  env: listMap(["name"], {
    valueFrom: obj({
      fieldRef: atomic,
      resourceFieldRef: atomic,
      configMapKeyRef: atomic,
      secretKeyRef: atomic,
      fileKeyRef: atomic,
    }),
  }),
  volumeMounts: listMap(["mountPath"]),
  volumeDevices: listMap(["devicePath"]),
  resources: obj({ claims: listMap(["name"]) }),
};

const podSpec = obj({
  containers: listMap(["name"], container),
  initContainers: listMap(["name"], container),
  ephemeralContainers: listMap(["name"], container),
  volumes: listMap(["name"]),
  imagePullSecrets: listMap(["name"]),
  hostAliases: listMap(["ip"]),
  topologySpreadConstraints: listMap(["topologyKey", "whenUnsatisfiable"], { labelSelector }),
  resourceClaims: listMap(["name"]),
  schedulingGates: listMap(["name"]),
  nodeSelector: atomic,
  affinity: obj({ nodeAffinity: obj({ requiredDuringSchedulingIgnoredDuringExecution: atomic }) }),
});

const podTemplate = obj({ spec: podSpec });
const conditions = listMap(["type"]);

const DEPLOYMENT = obj({
  spec: obj({ selector: labelSelector, template: podTemplate }),
  status: obj({ conditions }),
});

const STATEFUL_SET = obj({
  spec: obj({ selector: labelSelector, template: podTemplate }),
  status: obj({ conditions }),
});

const SERVICE = obj({
  spec: obj({ ports: listMap(["port", "protocol"], { protocol }), selector: atomic }),
  status: obj({ conditions }),
});

/** ObjectReference is atomic: an Event's reference is owned and replaced whole. */
const CORE_EVENT = obj({ involvedObject: atomic, related: atomic });
const EVENT_V1 = obj({ regarding: atomic, related: atomic });

const BY_KIND: Record<string, SchemaNode> = {
  "apps/v1/Deployment": DEPLOYMENT,
  "apps/v1/StatefulSet": STATEFUL_SET,
  "/v1/Service": SERVICE,
  "/v1/Event": CORE_EVENT,
  "events.k8s.io/v1/Event": EVENT_V1,
  "policy/v1/PodDisruptionBudget": obj({
    spec: obj({ selector: labelSelector }),
    status: obj({ conditions }),
  }),
  "networking.k8s.io/v1/NetworkPolicy": obj({ spec: obj({ podSelector: labelSelector }) }),
};

/** The merge schema of a built-in group/version/kind, if the server knows one. */
export function mergeSchemaOf(group: string, version: string, kind: string): SchemaNode | undefined {
  return BY_KIND[`${group}/${version}/${kind}`];
}
