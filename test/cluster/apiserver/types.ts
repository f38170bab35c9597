/** Shapes shared by the simulated API server's modules. */

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

/** A stored Kubernetes object: plain JSON with the usual metadata. */
export interface KObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  [key: string]: unknown;
}

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: OwnerReference[];
  managedFields?: ManagedFieldsEntry[];
  [key: string]: unknown;
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface ManagedFieldsEntry {
  manager: string;
  operation: "Apply" | "Update";
  apiVersion: string;
  /** Left out where the real server leaves it out (an entry written through the scale subresource). */
  time?: string;
  fieldsType: "FieldsV1";
  fieldsV1: JsonObject;
  subresource?: string;
}

/** A structural schema node (the subset of OpenAPI v3 that CRDs use and we read). */
export interface SchemaNode {
  type?: string;
  properties?: Record<string, SchemaNode>;
  additionalProperties?: SchemaNode | boolean;
  items?: SchemaNode;
  "x-kubernetes-preserve-unknown-fields"?: boolean;
  "x-kubernetes-list-type"?: "atomic" | "set" | "map";
  "x-kubernetes-list-map-keys"?: string[];
  "x-kubernetes-map-type"?: "atomic" | "granular";
  "x-kubernetes-int-or-string"?: boolean;
  "x-kubernetes-embedded-resource"?: boolean;
  [key: string]: unknown;
}

export interface PrinterColumn {
  name: string;
  type: string;
  jsonPath: string;
  description?: string;
  priority?: number;
  format?: string;
}

/** Everything the server knows about one served resource (one group/version/plural). */
export interface ResourceType {
  group: string; // "" for core
  version: string;
  plural: string;
  singular: string;
  kind: string;
  listKind: string;
  namespaced: boolean;
  shortNames: string[];
  categories: string[];
  verbs: string[];
  /** The status subresource is served and status is split from the main resource. */
  statusSubresource: boolean;
  /** The scale subresource is served: where replicas and the selector live in the object. */
  scale?: ScaleSubresource;
  /** metadata.generation is kept (custom resources and a few built-ins). */
  hasGeneration: boolean;
  /** undefined: no schema (built-in kinds we accept loosely). */
  schema?: SchemaNode;
  /**
   * A built-in kind's merge semantics for server-side apply and managedFields (list keys, atomic
   * maps; merge-schemas.ts), never used to validate or prune.
   */
  mergeSchema?: SchemaNode;
  /**
   * The object as the kind's Go type writes it (fields never left out: an Event's `source: {}`,
   * `eventTime: null`), applied to every object served; not part of what ownership compares.
   */
  encode?: (o: KObject) => KObject;
  /** The server's own Table for the kind (kubectl get's columns), instead of Name + printer columns. */
  table?: TablePrinter;
  printerColumns: PrinterColumn[];
  /** Set for resources that come from a CRD (the CRD's name). */
  crdName?: string;
  /**
   * Served from another resource's storage (events.k8s.io/v1 Events are core v1 Events): the
   * stored resource's group/plural and the conversion each way.
   */
  storage?: StorageView;
  /** Field selector labels beyond metadata.name and metadata.namespace, read from the served shape. */
  fieldLabels?: Record<string, (o: KObject) => string | undefined>;
}

export interface TableColumn {
  name: string;
  type: string;
  format?: string;
  description?: string;
  priority?: number;
}

export interface TablePrinter {
  columns: TableColumn[];
  /** One row's cells, in the order of `columns`; `now` in milliseconds. */
  cells(o: KObject, now: number): unknown[];
}

export interface StorageView {
  /** typeKey (`group/plural`) of the resource whose objects these are. */
  key: string;
  fromStored(o: KObject): KObject;
  toStored(o: KObject): KObject;
}

export interface ScaleSubresource {
  /** JSON paths, as a CRD declares them: `.spec.replicas`, `.status.replicas`, `.status.selector` */
  specReplicasPath: string;
  statusReplicasPath: string;
  labelSelectorPath?: string;
}

export function apiVersionOf(t: Pick<ResourceType, "group" | "version">): string {
  return t.group === "" ? t.version : `${t.group}/${t.version}`;
}

export function groupResource(t: Pick<ResourceType, "group" | "plural">): string {
  return t.group === "" ? t.plural : `${t.plural}.${t.group}`;
}
