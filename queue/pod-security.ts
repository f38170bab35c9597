/**
 * The Pod Security Standards (pure), as the API server's Pod Security admission checks them at
 * `latest`: what a Pod template may hold at level `baseline` or `restricted`. The gateway checks
 * every object of a Pod-bearing kind an intake write carries against the level of the namespace
 * it lands in (the `pod-security.kubernetes.io/enforce` label), so an intake token, whose writes
 * the applier applies with its own (often cluster-wide) rights, carries no Pod its namespace's
 * editors could not create themselves. The admission plugin checks only Pods; here the templates
 * of the workload kinds are checked too, because a Deployment whose Pods the namespace refuses is
 * only a failure later.
 *
 * Each check follows k8s.io/pod-security-admission/policy (check_*.go) and reports in its words:
 * `host namespaces (hostPID=true)`, `privileged (container "app" must not set
 * securityContext.privileged=true)`.
 */

export const POD_SECURITY_LEVELS = ["privileged", "baseline", "restricted"] as const;
export type PodSecurityLevel = (typeof POD_SECURITY_LEVELS)[number];

/** The namespace label Pod Security admission enforces. */
export const POD_SECURITY_ENFORCE_LABEL = "pod-security.kubernetes.io/enforce";

/**
 * The level applygate holds writes to when a namespace has no enforce label. Pod Security's own
 * default is the cluster's admission configuration (privileged unless set), which applygate
 * cannot read: it assumes `baseline`, and a namespace that must take privileged Pods says so.
 */
export const DEFAULT_POD_SECURITY_LEVEL: PodSecurityLevel = "baseline";

/**
 * The level a namespace enforces, from its labels. No label: the default above. A value Pod
 * Security cannot read counts as `restricted`, as the admission plugin evaluates it.
 */
export function enforcedLevel(labels: Readonly<Record<string, string>> | undefined): PodSecurityLevel {
  const v = labels?.[POD_SECURITY_ENFORCE_LABEL];
  if (v === undefined) return DEFAULT_POD_SECURITY_LEVEL;
  return POD_SECURITY_LEVELS.find((l) => l === v) ?? "restricted";
}

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj | undefined =>
  v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Obj) : undefined;
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

/** Where the Pod template sits in each Pod-bearing kind, by API group and kind. */
const TEMPLATE_PATHS: Record<string, readonly string[]> = {
  "/Pod": [],
  "/ReplicationController": ["spec", "template"],
  "apps/Deployment": ["spec", "template"],
  "apps/StatefulSet": ["spec", "template"],
  "apps/DaemonSet": ["spec", "template"],
  "apps/ReplicaSet": ["spec", "template"],
  // Served no more, but an applier may still be given them: checked all the same.
  "extensions/Deployment": ["spec", "template"],
  "extensions/DaemonSet": ["spec", "template"],
  "extensions/ReplicaSet": ["spec", "template"],
  "batch/Job": ["spec", "template"],
  "batch/CronJob": ["spec", "jobTemplate", "spec", "template"],
};

/** The Pod-bearing kinds, as `group/Kind` (core kinds as `/Kind`). */
export const POD_BEARING_KINDS: readonly string[] = Object.keys(TEMPLATE_PATHS);

/** An object of a Pod-bearing kind: its Pod template's metadata and spec; undefined for other kinds. */
export function podTemplateOf(o: {
  apiVersion: string;
  kind: string;
}): { metadata: Obj; spec: Obj } | undefined {
  const slash = o.apiVersion.indexOf("/");
  const group = slash < 0 ? "" : o.apiVersion.slice(0, slash);
  const path = TEMPLATE_PATHS[`${group}/${o.kind}`];
  if (!path) return undefined;
  let at: unknown = o;
  for (const k of path) at = obj(at)?.[k];
  const template = obj(at) ?? {};
  return { metadata: obj(template.metadata) ?? {}, spec: obj(template.spec) ?? {} };
}

interface Container {
  kind: "container" | "initContainer" | "ephemeralContainer";
  name: string;
  c: Obj;
  sc: Obj;
}

function containersOf(spec: Obj): Container[] {
  const out: Container[] = [];
  const add = (kind: Container["kind"], v: unknown) => {
    for (const item of list(v)) {
      const c = obj(item) ?? {};
      out.push({ kind, name: str(c.name) ?? "", c, sc: obj(c.securityContext) ?? {} });
    }
  };
  add("container", spec.containers);
  add("initContainer", spec.initContainers);
  add("ephemeralContainer", spec.ephemeralContainers);
  return out;
}

const quoted = (names: readonly string[]) => names.map((n) => JSON.stringify(n)).join(", ");
/** `container "a"` / `containers "a", "b"`, as the admission plugin names them. */
const containersNamed = (cs: readonly Container[]) =>
  `${cs.length === 1 ? "container" : "containers"} ${quoted(cs.map((c) => c.name))}`;
const must = (cs: readonly Container[], what: string) => `${containersNamed(cs)} must ${what}`;

const BASELINE_CAPABILITIES = new Set([
  "AUDIT_WRITE",
  "CHOWN",
  "DAC_OVERRIDE",
  "FOWNER",
  "FSETID",
  "KILL",
  "MKNOD",
  "NET_BIND_SERVICE",
  "SETFCAP",
  "SETGID",
  "SETPCAP",
  "SETUID",
  "SYS_CHROOT",
]);

const SAFE_SYSCTLS = new Set([
  "kernel.shm_rmid_forced",
  "net.ipv4.ip_local_port_range",
  "net.ipv4.ip_unprivileged_port_start",
  "net.ipv4.tcp_syncookies",
  "net.ipv4.ping_group_range",
  "net.ipv4.ip_local_reserved_ports",
  "net.ipv4.tcp_keepalive_time",
  "net.ipv4.tcp_fin_timeout",
  "net.ipv4.tcp_keepalive_intvl",
  "net.ipv4.tcp_keepalive_probes",
]);

const SELINUX_TYPES = new Set([
  "",
  "container_t",
  "container_init_t",
  "container_kvm_t",
  "container_engine_t",
]);

const RESTRICTED_VOLUMES = new Set([
  "configMap",
  "csi",
  "downwardAPI",
  "emptyDir",
  "ephemeral",
  "persistentVolumeClaim",
  "projected",
  "secret",
]);

/** What a template breaks of the baseline level, one entry per check, in the admission's words. */
function baselineViolations(metadata: Obj, spec: Obj): string[] {
  const out: string[] = [];
  const psc = obj(spec.securityContext) ?? {};
  const cs = containersOf(spec);

  // HostProcess
  const hostProcess = cs.filter((c) => obj(c.sc.windowsOptions)?.hostProcess === true);
  if (obj(psc.windowsOptions)?.hostProcess === true || hostProcess.length > 0)
    out.push(
      `hostProcess (${hostProcess.length > 0 ? must(hostProcess, "not set securityContext.windowsOptions.hostProcess=true") : "pod must not set securityContext.windowsOptions.hostProcess=true"})`,
    );

  // Host namespaces
  const hostNs = (["hostNetwork", "hostPID", "hostIPC"] as const).filter((k) => spec[k] === true);
  if (hostNs.length > 0) out.push(`host namespaces (${hostNs.map((k) => `${k}=true`).join(", ")})`);

  // Privileged containers
  const privileged = cs.filter((c) => c.sc.privileged === true);
  if (privileged.length > 0)
    out.push(`privileged (${must(privileged, "not set securityContext.privileged=true")})`);

  // Capabilities
  const added = new Set<string>();
  const adding = cs.filter((c) => {
    const bad = list(obj(c.sc.capabilities)?.add).filter(
      (a) => typeof a !== "string" || !BASELINE_CAPABILITIES.has(a),
    );
    for (const a of bad) added.add(String(a));
    return bad.length > 0;
  });
  if (adding.length > 0)
    out.push(
      `non-default capabilities (${must(adding, `not include ${quoted([...added])} in securityContext.capabilities.add`)})`,
    );

  // HostPath volumes
  const hostPaths = list(spec.volumes)
    .map(obj)
    .filter((v) => v?.hostPath !== undefined && v?.hostPath !== null)
    .map((v) => str(v?.name) ?? "");
  if (hostPaths.length > 0)
    out.push(`hostPath volumes (${hostPaths.length === 1 ? "volume" : "volumes"} ${quoted(hostPaths)})`);

  // Host ports
  const ports = new Set<string>();
  const withPorts = cs.filter((c) => {
    const bad = list(c.c.ports)
      .map((p) => obj(p)?.hostPort)
      .filter((h) => h !== undefined && h !== null && h !== 0);
    for (const h of bad) ports.add(String(h));
    return bad.length > 0;
  });
  if (withPorts.length > 0)
    out.push(
      `hostPort (${containersNamed(withPorts)} ${withPorts.length === 1 ? "uses" : "use"} ${[...ports].join(", ")})`,
    );

  // AppArmor
  const appArmor: string[] = [];
  for (const [k, v] of Object.entries(obj(metadata.annotations) ?? {})) {
    if (!k.startsWith("container.apparmor.security.beta.kubernetes.io/")) continue;
    const value = str(v) ?? "";
    if (value !== "" && value !== "runtime/default" && !value.startsWith("localhost/"))
      appArmor.push(`${k}=${JSON.stringify(value)}`);
  }
  const badProfile = (sc: Obj) => {
    const t = obj(sc.appArmorProfile)?.type;
    return t !== undefined && t !== "RuntimeDefault" && t !== "Localhost";
  };
  if (badProfile(psc))
    appArmor.push(
      `pod must not set securityContext.appArmorProfile.type=${String(obj(psc.appArmorProfile)?.type)}`,
    );
  const profiled = cs.filter((c) => badProfile(c.sc));
  if (profiled.length > 0)
    appArmor.push(must(profiled, "not set securityContext.appArmorProfile.type to Unconfined"));
  if (appArmor.length > 0) out.push(`forbidden AppArmor profiles (${appArmor.join("; ")})`);

  // SELinux
  const badSelinux = (sc: Obj) => {
    const o = obj(sc.seLinuxOptions);
    if (!o) return false;
    const t = o.type;
    return (
      (t !== undefined && (typeof t !== "string" || !SELINUX_TYPES.has(t))) ||
      (o.user !== undefined && o.user !== "") ||
      (o.role !== undefined && o.role !== "")
    );
  };
  const selinux = cs.filter((c) => badSelinux(c.sc));
  if (badSelinux(psc) || selinux.length > 0)
    out.push(
      `seLinuxOptions (${selinux.length > 0 ? must(selinux, "not set forbidden securityContext.seLinuxOptions") : "pod must not set forbidden securityContext.seLinuxOptions"})`,
    );

  // /proc mount
  const procMount = cs.filter((c) => c.sc.procMount !== undefined && c.sc.procMount !== "Default");
  if (procMount.length > 0) out.push(`procMount (${must(procMount, "not set securityContext.procMount")})`);

  // Seccomp (baseline: not Unconfined)
  const unconfined = (sc: Obj) => obj(sc.seccompProfile)?.type === "Unconfined";
  const unconfinedCs = cs.filter((c) => unconfined(c.sc));
  if (unconfined(psc) || unconfinedCs.length > 0)
    out.push(
      `seccompProfile (${unconfinedCs.length > 0 ? must(unconfinedCs, 'not set securityContext.seccompProfile.type to "Unconfined"') : 'pod must not set securityContext.seccompProfile.type to "Unconfined"'})`,
    );

  // Sysctls
  const sysctls = list(psc.sysctls)
    .map((s) => str(obj(s)?.name) ?? "")
    .filter((n) => !SAFE_SYSCTLS.has(n));
  if (sysctls.length > 0) out.push(`forbidden sysctls (${sysctls.join(", ")})`);
  return out;
}

/** What a template breaks of the restricted level beyond baseline. */
function restrictedViolations(spec: Obj): string[] {
  const out: string[] = [];
  const psc = obj(spec.securityContext) ?? {};
  const cs = containersOf(spec);
  const windows = obj(spec.os)?.name === "windows";

  // Volume types
  const volumes: string[] = [];
  for (const v of list(spec.volumes).map(obj)) {
    const type = Object.keys(v ?? {}).find((k) => k !== "name" && v?.[k] !== null && v?.[k] !== undefined);
    if (type !== undefined && !RESTRICTED_VOLUMES.has(type) && type !== "hostPath")
      volumes.push(`${JSON.stringify(str(v?.name) ?? "")} uses ${type}`);
  }
  if (volumes.length > 0) out.push(`restricted volume types (${volumes.join(", ")})`);

  if (!windows) {
    // Privilege escalation
    const escalating = cs.filter((c) => c.sc.allowPrivilegeEscalation !== false);
    if (escalating.length > 0)
      out.push(
        `allowPrivilegeEscalation != false (${must(escalating, "set securityContext.allowPrivilegeEscalation=false")})`,
      );
  }

  // Running as non-root
  const podNonRoot = psc.runAsNonRoot === true;
  const rootAllowed = cs.filter(
    (c) => c.sc.runAsNonRoot === false || (c.sc.runAsNonRoot === undefined && !podNonRoot),
  );
  if (psc.runAsNonRoot === false)
    out.push("runAsNonRoot != true (pod must not set securityContext.runAsNonRoot=false)");
  else if (rootAllowed.length > 0)
    out.push(`runAsNonRoot != true (pod or ${must(rootAllowed, "set securityContext.runAsNonRoot=true")})`);

  // Non-root user
  const rootUser = cs.filter((c) => c.sc.runAsUser === 0);
  if (psc.runAsUser === 0 || rootUser.length > 0)
    out.push(
      `runAsUser=0 (${rootUser.length > 0 ? must(rootUser, "not set runAsUser=0") : "pod must not set runAsUser=0"})`,
    );

  if (!windows) {
    // Seccomp (restricted: RuntimeDefault or Localhost, at pod level or on every container)
    const allowed = (t: unknown) => t === "RuntimeDefault" || t === "Localhost";
    const podType = obj(psc.seccompProfile)?.type;
    const bad = cs.filter((c) => {
      const t = obj(c.sc.seccompProfile)?.type;
      return t === undefined ? !allowed(podType) : !allowed(t);
    });
    if (podType !== undefined && !allowed(podType))
      out.push(
        `seccompProfile (pod must not set securityContext.seccompProfile.type to ${JSON.stringify(podType)})`,
      );
    else if (bad.length > 0)
      out.push(
        `seccompProfile (pod or ${must(bad, 'set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"')})`,
      );

    // Capabilities: drop ALL, add at most NET_BIND_SERVICE
    const notDropping = cs.filter((c) => !list(obj(c.sc.capabilities)?.drop).includes("ALL"));
    if (notDropping.length > 0)
      out.push(
        `unrestricted capabilities (${must(notDropping, 'set securityContext.capabilities.drop=["ALL"]')})`,
      );
    const adding = cs.filter((c) => list(obj(c.sc.capabilities)?.add).some((a) => a !== "NET_BIND_SERVICE"));
    if (adding.length > 0)
      out.push(
        `unrestricted capabilities (${must(adding, 'not add capabilities beyond "NET_BIND_SERVICE" in securityContext.capabilities.add')})`,
      );
  }
  return out;
}

/**
 * What the object breaks of `level`, in the admission plugin's words; empty when it meets the
 * level or is not of a Pod-bearing kind.
 */
export function podSecurityViolations(
  o: { apiVersion: string; kind: string },
  level: PodSecurityLevel,
): string[] {
  if (level === "privileged") return [];
  const t = podTemplateOf(o);
  if (!t) return [];
  const base = baselineViolations(t.metadata, t.spec);
  return level === "baseline" ? base : [...base, ...restrictedViolations(t.spec)];
}

/** An intake change as the check reads it. */
type CheckedChange =
  | {
      op: "upsert";
      object: { apiVersion: string; kind: string; metadata: { name: string; namespace?: string } };
    }
  | { op: "delete" };

export interface PodSecurityRefusal {
  index: number;
  /** `Deployment apps/web` */
  object: string;
  level: PodSecurityLevel;
  violations: string[];
  message: string;
}

/**
 * The first change whose Pod template breaks the level its namespace enforces, or undefined. An
 * object without a namespace (one a ScopeGrant lets be cluster-scoped) is judged in `fallback`,
 * the GitTarget's namespace.
 */
export function podSecurityRefusal(
  changes: readonly CheckedChange[],
  levelOf: (namespace: string) => PodSecurityLevel,
  fallback: string,
): PodSecurityRefusal | undefined {
  for (let i = 0; i < changes.length; i++) {
    const c = changes[i] as CheckedChange;
    if (c.op !== "upsert") continue;
    const namespace = c.object.metadata.namespace ?? fallback;
    const level = levelOf(namespace);
    const violations = podSecurityViolations(c.object, level);
    if (violations.length === 0) continue;
    const object = `${c.object.kind} ${namespace}/${c.object.metadata.name}`;
    return {
      index: i,
      object,
      level,
      violations,
      message: `${object}: violates PodSecurity "${level}:latest" of namespace ${namespace}: ${violations.join("; ")}`,
    };
  }
  return undefined;
}
