/**
 * Defaulting of the built-in workload kinds, as kube-apiserver defaults every write it decodes
 * (k8s.io/kubernetes pkg/apis/apps/v1 and core/v1 SetDefaults_*, in the order their generated
 * SetObjectDefaults_* call them), plus the fields the Go types always write (`resources: {}`,
 * `status: {}`). Served here: Deployment and StatefulSet. Pure: mutates only the object given.
 *
 * Not done: a quantity's canonical form (`0.1` stays `0.1`, the real server stores `100m`), the
 * image volume's pull policy, and the defaults of volume sources nobody uses in manifests here
 * (iSCSI, RBD, Azure disk, ScaleIO, ephemeral claim templates).
 */
import type { KObject } from "./types.js";

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

/** The object at `o[key]`, created empty when it is not one. */
function child(o: Obj, key: string): Obj {
  if (!isObj(o[key])) o[key] = {};
  return o[key] as Obj;
}

function setDefault(o: Obj, key: string, value: unknown): void {
  if (o[key] === undefined || o[key] === null || o[key] === "") o[key] = value;
}

const items = (v: unknown): Obj[] => (Array.isArray(v) ? v.filter(isObj) : []);

const NAME_COMPONENT = "[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*";
const DOMAIN =
  "(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*|\\[[0-9a-fA-F:.]+\\])(?::[0-9]+)?";
const REFERENCE = new RegExp(
  `^(?:${DOMAIN}/)?${NAME_COMPONENT}(?:/${NAME_COMPONENT})*(?::([\\w][\\w.-]{0,127}))?(?:@([A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}))?$`,
);

/**
 * A container's pull policy when none is given (SetDefaults_Container with parsers.ParseImageName):
 * `Always` for the tag `latest`, and for a reference with neither tag nor digest (taken as
 * `latest`); `IfNotPresent` for any other tag, a digest alone, and a reference that does not parse.
 */
export function defaultPullPolicy(image: unknown): "Always" | "IfNotPresent" {
  if (typeof image !== "string") return "IfNotPresent";
  const m = REFERENCE.exec(image);
  if (!m) return "IfNotPresent";
  const [, tag, digest] = m;
  if (tag === "latest" || (tag === undefined && digest === undefined)) return "Always";
  return "IfNotPresent";
}

/** A probe's counts are plain int32s: 0 (or none) takes the default. */
function defaultProbe(probe: unknown): void {
  if (!isObj(probe)) return;
  const counts = { timeoutSeconds: 1, periodSeconds: 10, successThreshold: 1, failureThreshold: 3 };
  for (const [k, v] of Object.entries(counts)) if (!probe[k]) probe[k] = v;
  defaultHttpGet(probe.httpGet);
  if (isObj(probe.grpc) && probe.grpc.service === undefined) probe.grpc.service = "";
}

function defaultHttpGet(action: unknown): void {
  if (!isObj(action)) return;
  setDefault(action, "path", "/");
  setDefault(action, "scheme", "HTTP");
}

function defaultFieldRef(ref: unknown): void {
  if (isObj(ref)) setDefault(ref, "apiVersion", "v1");
}

function defaultContainer(c: Obj): void {
  setDefault(c, "imagePullPolicy", defaultPullPolicy(c.image));
  setDefault(c, "terminationMessagePath", "/dev/termination-log");
  setDefault(c, "terminationMessagePolicy", "File");
  for (const p of items(c.ports)) setDefault(p, "protocol", "TCP");
  for (const e of items(c.env)) {
    if (!isObj(e.valueFrom)) continue;
    defaultFieldRef(e.valueFrom.fieldRef);
    if (isObj(e.valueFrom.fileKeyRef) && e.valueFrom.fileKeyRef.optional === undefined)
      e.valueFrom.fileKeyRef.optional = false;
  }
  defaultProbe(c.livenessProbe);
  defaultProbe(c.readinessProbe);
  defaultProbe(c.startupProbe);
  if (isObj(c.lifecycle)) {
    for (const hook of ["postStart", "preStop"]) {
      const h = c.lifecycle[hook];
      if (isObj(h)) defaultHttpGet(h.httpGet);
    }
  }
  // ResourceRequirements is a struct, not a pointer: always written.
  child(c, "resources");
}

/** Volume sources: a volume naming none is an emptyDir (SetDefaults_Volume). */
const SOURCELESS = new Set(["name"]);

function defaultVolume(v: Obj): void {
  if (Object.keys(v).every((k) => SOURCELESS.has(k) || v[k] === null || v[k] === undefined)) v.emptyDir = {};
  if (isObj(v.hostPath) && v.hostPath.type === undefined) v.hostPath.type = "";
  for (const source of ["secret", "configMap", "downwardAPI", "projected"]) {
    const s = v[source];
    if (isObj(s) && s.defaultMode === undefined) s.defaultMode = 420;
  }
  if (isObj(v.downwardAPI)) for (const i of items(v.downwardAPI.items)) defaultFieldRef(i.fieldRef);
  if (isObj(v.projected)) {
    for (const s of items(v.projected.sources)) {
      if (isObj(s.downwardAPI)) for (const i of items(s.downwardAPI.items)) defaultFieldRef(i.fieldRef);
      if (isObj(s.serviceAccountToken) && s.serviceAccountToken.expirationSeconds === undefined)
        s.serviceAccountToken.expirationSeconds = 3600;
    }
  }
}

/** SetDefaults_PodSpec and what the generated defaulters call below it, for a Pod template's spec. */
export function defaultPodSpec(spec: Obj): void {
  setDefault(spec, "dnsPolicy", "ClusterFirst");
  setDefault(spec, "restartPolicy", "Always");
  if (!isObj(spec.securityContext)) spec.securityContext = {};
  setDefault(spec, "terminationGracePeriodSeconds", 30);
  setDefault(spec, "schedulerName", "default-scheduler");
  for (const v of items(spec.volumes)) defaultVolume(v);
  for (const c of items(spec.initContainers)) defaultContainer(c);
  for (const c of items(spec.containers)) defaultContainer(c);
  for (const c of items(spec.ephemeralContainers)) defaultContainer(c);
}

function defaultTemplate(spec: Obj): void {
  const template = child(spec, "template");
  child(template, "metadata");
  defaultPodSpec(child(template, "spec"));
}

function defaultDeployment(o: KObject): void {
  const spec = child(o, "spec");
  setDefault(spec, "replicas", 1);
  const strategy = child(spec, "strategy");
  setDefault(strategy, "type", "RollingUpdate");
  if (strategy.type === "RollingUpdate") {
    const rolling = child(strategy, "rollingUpdate");
    setDefault(rolling, "maxUnavailable", "25%");
    setDefault(rolling, "maxSurge", "25%");
  }
  setDefault(spec, "revisionHistoryLimit", 10);
  setDefault(spec, "progressDeadlineSeconds", 600);
  defaultTemplate(spec);
  // DeploymentStatus: every field omitempty, the struct itself always written.
  if (!isObj(o.status)) o.status = {};
}

function defaultStatefulSet(o: KObject): void {
  const spec = child(o, "spec");
  setDefault(spec, "podManagementPolicy", "OrderedReady");
  const strategy = child(spec, "updateStrategy");
  if (!strategy.type) {
    strategy.type = "RollingUpdate";
    child(strategy, "rollingUpdate");
  }
  // The MaxUnavailableStatefulSet gate is off by default: no maxUnavailable.
  if (strategy.type === "RollingUpdate" && isObj(strategy.rollingUpdate))
    setDefault(strategy.rollingUpdate, "partition", 0);
  const retention = child(spec, "persistentVolumeClaimRetentionPolicy");
  setDefault(retention, "whenDeleted", "Retain");
  setDefault(retention, "whenScaled", "Retain");
  setDefault(spec, "replicas", 1);
  setDefault(spec, "revisionHistoryLimit", 10);
  defaultTemplate(spec);
  for (const claim of items(spec.volumeClaimTemplates)) {
    // apps/v1 conversion names the claims' kind (issue 87583); core/v1 defaults their spec and status.
    claim.apiVersion = "v1";
    claim.kind = "PersistentVolumeClaim";
    child(claim, "metadata");
    setDefault(child(claim, "spec"), "volumeMode", "Filesystem");
    setDefault(child(claim, "status"), "phase", "Pending");
  }
  // StatefulSetStatus writes replicas and availableReplicas even when they are 0.
  const status = child(o, "status");
  setDefault(status, "replicas", 0);
  setDefault(status, "availableReplicas", 0);
}

const WORKLOADS: Record<string, (o: KObject) => void> = {
  "apps/Deployment": defaultDeployment,
  "apps/StatefulSet": defaultStatefulSet,
};

/**
 * A workload's empty object as its Go type writes it: the structs and lists that are never left
 * out (`spec.strategy`, `spec.template`, its metadata and spec, `containers: null`). A create's Update owns what it
 * changed from this, so these hold no "." of their own in its managedFields, as on the real server.
 */
export function zeroWorkload(group: string, kind: string): object {
  const template = { metadata: {}, spec: { containers: null } };
  if (group === "apps" && kind === "Deployment") return { spec: { strategy: {}, template }, status: {} };
  if (group === "apps" && kind === "StatefulSet")
    return { spec: { template, updateStrategy: {} }, status: { replicas: 0, availableReplicas: 0 } };
  return {};
}

/** Defaults a workload of `group`/`kind` in place, as the real server stores it; others are left. */
export function defaultWorkload(group: string, kind: string, o: KObject): void {
  WORKLOADS[`${group}/${kind}`]?.(o);
}
