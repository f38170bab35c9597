import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  enforcedLevel,
  POD_BEARING_KINDS,
  type PodSecurityLevel,
  podSecurityRefusal,
  podSecurityViolations,
  podTemplateOf,
} from "./pod-security.js";

type Obj = Record<string, unknown>;

/** A Pod that meets `restricted`. */
const restrictedSpec = (): Obj => ({
  securityContext: { runAsNonRoot: true, seccompProfile: { type: "RuntimeDefault" } },
  containers: [
    {
      name: "app",
      image: "app:1",
      securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } },
    },
  ],
  volumes: [{ name: "cfg", configMap: { name: "cfg" } }],
});

const pod = (spec: Obj, annotations?: Obj) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "p", namespace: "team", ...(annotations ? { annotations } : {}) },
  spec,
});

/** The same Pod template inside each Pod-bearing kind. */
function wrapped(kindKey: string, metadata: Obj, spec: Obj): { apiVersion: string; kind: string } & Obj {
  const [group, kind] = kindKey.split("/") as [string, string];
  const apiVersion = group === "" ? "v1" : `${group}/v1`;
  const template = { metadata, spec };
  const base: { apiVersion: string; kind: string; metadata: Obj } = {
    apiVersion,
    kind,
    metadata: { name: "w", namespace: "team" },
  };
  if (kind === "Pod") return { ...base, metadata: { ...base.metadata, ...metadata }, spec };
  if (kind === "CronJob") return { ...base, spec: { jobTemplate: { spec: { template } } } };
  return { ...base, spec: { template } };
}

/** One way each baseline check is broken (on a copy of a restricted Pod). */
const BASELINE_BREAKS: Record<string, (s: Obj, m: Obj) => void> = {
  hostPID: (s) => {
    s.hostPID = true;
  },
  hostNetwork: (s) => {
    s.hostNetwork = true;
  },
  hostIPC: (s) => {
    s.hostIPC = true;
  },
  privileged: (s) => {
    container(s).securityContext = { ...sc(s), privileged: true };
  },
  capability: (s) => {
    container(s).securityContext = { ...sc(s), capabilities: { drop: ["ALL"], add: ["SYS_ADMIN"] } };
  },
  hostPath: (s) => {
    (s.volumes as Obj[]).push({ name: "root", hostPath: { path: "/" } });
  },
  hostPort: (s) => {
    container(s).ports = [{ containerPort: 80, hostPort: 80 }];
  },
  hostProcess: (s) => {
    container(s).securityContext = { ...sc(s), windowsOptions: { hostProcess: true } };
  },
  appArmorAnnotation: (_s, m) => {
    m.annotations = { "container.apparmor.security.beta.kubernetes.io/app": "unconfined" };
  },
  appArmorField: (s) => {
    container(s).securityContext = { ...sc(s), appArmorProfile: { type: "Unconfined" } };
  },
  seLinux: (s) => {
    container(s).securityContext = { ...sc(s), seLinuxOptions: { type: "spc_t" } };
  },
  seLinuxUser: (s) => {
    (s.securityContext as Obj).seLinuxOptions = { user: "system_u" };
  },
  procMount: (s) => {
    container(s).securityContext = { ...sc(s), procMount: "Unmasked" };
  },
  seccomp: (s) => {
    (s.securityContext as Obj).seccompProfile = { type: "Unconfined" };
  },
  sysctl: (s) => {
    (s.securityContext as Obj).sysctls = [{ name: "kernel.msgmax", value: "1" }];
  },
  initContainer: (s) => {
    s.initContainers = [{ name: "init", image: "i", securityContext: { privileged: true } }];
  },
  ephemeralContainer: (s) => {
    s.ephemeralContainers = [{ name: "dbg", image: "d", securityContext: { privileged: true } }];
  },
};

/** One way each restricted-only check is broken (the Pod still meets baseline). */
const RESTRICTED_BREAKS: Record<string, (s: Obj) => void> = {
  volumeType: (s) => {
    (s.volumes as Obj[]).push({ name: "nfs", nfs: { server: "nfs", path: "/" } });
  },
  escalation: (s) => {
    container(s).securityContext = { ...sc(s), allowPrivilegeEscalation: true };
  },
  escalationUnset: (s) => {
    const c = { ...sc(s) };
    delete c.allowPrivilegeEscalation;
    container(s).securityContext = c;
  },
  runAsNonRootUnset: (s) => {
    delete (s.securityContext as Obj).runAsNonRoot;
  },
  runAsNonRootFalse: (s) => {
    container(s).securityContext = { ...sc(s), runAsNonRoot: false };
  },
  runAsRoot: (s) => {
    (s.securityContext as Obj).runAsUser = 0;
  },
  seccompUnset: (s) => {
    delete (s.securityContext as Obj).seccompProfile;
  },
  capabilitiesNotDropped: (s) => {
    container(s).securityContext = { ...sc(s), capabilities: {} };
  },
  capabilityAdded: (s) => {
    container(s).securityContext = { ...sc(s), capabilities: { drop: ["ALL"], add: ["CHOWN"] } };
  },
};

function container(s: Obj): Obj {
  return (s.containers as Obj[])[0] as Obj;
}
function sc(s: Obj): Obj {
  return (container(s).securityContext as Obj) ?? {};
}

function broken(breaks: ((s: Obj, m: Obj) => void)[]): { metadata: Obj; spec: Obj } {
  const spec = structuredClone(restrictedSpec());
  const metadata: Obj = {};
  for (const b of breaks) b(spec, metadata);
  return { metadata, spec };
}

describe("the Pod Security level of a namespace", () => {
  it("is its enforce label; unlabelled: baseline; an unreadable value: restricted", () => {
    expect(enforcedLevel({ "pod-security.kubernetes.io/enforce": "privileged" })).toBe("privileged");
    expect(enforcedLevel({ "pod-security.kubernetes.io/enforce": "restricted" })).toBe("restricted");
    expect(enforcedLevel({ "pod-security.kubernetes.io/enforce": "baseline" })).toBe("baseline");
    expect(enforcedLevel({})).toBe("baseline");
    expect(enforcedLevel(undefined)).toBe("baseline");
    expect(enforcedLevel({ "pod-security.kubernetes.io/warn": "privileged" })).toBe("baseline");
    expect(enforcedLevel({ "pod-security.kubernetes.io/enforce": "Privileged" })).toBe("restricted");
  });
});

describe("Pod Security checks", () => {
  it("a Pod with hostPID and a privileged container breaks baseline, in the admission's words", () => {
    const spec = restrictedSpec();
    spec.hostPID = true;
    container(spec).securityContext = { ...sc(spec), privileged: true };
    expect(podSecurityViolations(pod(spec), "baseline")).toEqual([
      "host namespaces (hostPID=true)",
      'privileged (container "app" must not set securityContext.privileged=true)',
    ]);
    expect(podSecurityViolations(pod(spec), "privileged")).toEqual([]);
  });

  it("a restricted Pod meets every level; a plain one meets baseline but not restricted", () => {
    for (const level of ["privileged", "baseline", "restricted"] as const)
      expect(podSecurityViolations(pod(restrictedSpec()), level)).toEqual([]);
    const plain = pod({ containers: [{ name: "app", image: "app:1" }] });
    expect(podSecurityViolations(plain, "baseline")).toEqual([]);
    expect(podSecurityViolations(plain, "restricted")).toEqual([
      'allowPrivilegeEscalation != false (container "app" must set securityContext.allowPrivilegeEscalation=false)',
      'runAsNonRoot != true (pod or container "app" must set securityContext.runAsNonRoot=true)',
      'seccompProfile (pod or container "app" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")',
      'unrestricted capabilities (container "app" must set securityContext.capabilities.drop=["ALL"])',
    ]);
  });

  it("each baseline check refuses at baseline and restricted, never at privileged", () => {
    for (const [name, b] of Object.entries(BASELINE_BREAKS)) {
      const t = broken([b]);
      const o = pod(t.spec, t.metadata.annotations as Obj | undefined);
      expect(podSecurityViolations(o, "baseline"), name).toHaveLength(1);
      expect(podSecurityViolations(o, "restricted").length, name).toBeGreaterThanOrEqual(1);
      expect(podSecurityViolations(o, "privileged"), name).toEqual([]);
    }
  });

  it("each restricted check refuses at restricted only", () => {
    for (const [name, b] of Object.entries(RESTRICTED_BREAKS)) {
      const t = broken([b]);
      expect(podSecurityViolations(pod(t.spec), "restricted"), name).toHaveLength(1);
      expect(podSecurityViolations(pod(t.spec), "baseline"), name).toEqual([]);
    }
  });

  it("allows what baseline allows: default capabilities, safe sysctls, RuntimeDefault, hostPort 0", () => {
    const spec = restrictedSpec();
    container(spec).securityContext = {
      capabilities: { add: ["NET_BIND_SERVICE", "CHOWN", "KILL"] },
      seccompProfile: { type: "Localhost", localhostProfile: "p.json" },
      seLinuxOptions: { type: "container_t", level: "s0:c1" },
      procMount: "Default",
      appArmorProfile: { type: "RuntimeDefault" },
    };
    container(spec).ports = [{ containerPort: 80, hostPort: 0 }];
    (spec.securityContext as Obj).sysctls = [{ name: "net.ipv4.ip_local_port_range", value: "1024 65535" }];
    const o = pod(spec, { "container.apparmor.security.beta.kubernetes.io/app": "localhost/profile" });
    expect(podSecurityViolations(o, "baseline")).toEqual([]);
  });

  it("skips the Linux-only restricted checks for a Windows Pod", () => {
    const spec: Obj = {
      os: { name: "windows" },
      securityContext: { runAsNonRoot: true },
      containers: [{ name: "app", image: "app:1" }],
    };
    expect(podSecurityViolations(pod(spec), "restricted")).toEqual([]);
  });

  it("finds the template in every Pod-bearing kind, and judges it as the Pod it makes", () => {
    // Restricted breaks first: a later one on the same field (seccompUnset after seccomp,
    // capabilitiesNotDropped after capability) would undo a baseline break.
    const entries = [...Object.values(RESTRICTED_BREAKS), ...Object.values(BASELINE_BREAKS)];
    fc.assert(
      fc.property(
        fc.subarray(entries),
        fc.constantFrom<PodSecurityLevel>("privileged", "baseline", "restricted"),
        (breaks, level) => {
          const t = broken(breaks);
          const asPod = podSecurityViolations(pod(t.spec, t.metadata.annotations as Obj | undefined), level);
          for (const k of POD_BEARING_KINDS) {
            const o = wrapped(k, t.metadata, t.spec);
            expect(podTemplateOf(o)).toBeDefined();
            expect(podSecurityViolations(o, level)).toEqual(asPod);
          }
          // Stricter levels refuse at least what looser ones refuse.
          const base = podSecurityViolations(
            pod(t.spec, t.metadata.annotations as Obj | undefined),
            "baseline",
          );
          const restricted = podSecurityViolations(
            pod(t.spec, t.metadata.annotations as Obj | undefined),
            "restricted",
          );
          expect(restricted.slice(0, base.length)).toEqual(base);
          // Any baseline break is refused at baseline.
          const anyBaseline = breaks.some((b) => Object.values(BASELINE_BREAKS).includes(b as never));
          expect(base.length > 0).toBe(anyBaseline);
          expect(restricted.length > 0).toBe(breaks.length > 0);
        },
      ),
    );
  });

  it("never throws on whatever an object holds, and ignores kinds that make no Pods", () => {
    fc.assert(
      fc.property(fc.constantFrom(...POD_BEARING_KINDS), fc.jsonValue(), (k, junk) => {
        const o = { ...wrapped(k, {}, {}), spec: junk };
        expect(() => podSecurityViolations(o, "restricted")).not.toThrow();
      }),
    );
    const cm = { apiVersion: "v1", kind: "ConfigMap", spec: { hostPID: true } };
    expect(podSecurityViolations(cm, "restricted")).toEqual([]);
    // A kind named Deployment in another group makes no Pods applygate knows of.
    const other = {
      apiVersion: "example.com/v1",
      kind: "Deployment",
      spec: { template: { spec: { hostPID: true } } },
    };
    expect(podSecurityViolations(other, "restricted")).toEqual([]);
  });
});

describe("podSecurityRefusal", () => {
  const change = (namespace: string | undefined, spec: Obj) => ({
    op: "upsert" as const,
    object: {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "web", ...(namespace ? { namespace } : {}) },
      spec: { template: { spec } },
    },
  });
  const levels: Record<string, PodSecurityLevel> = { ops: "privileged", team: "baseline" };
  const levelOf = (ns: string) => levels[ns] ?? "baseline";

  it("judges each object in its own namespace's level and names the first it refuses", () => {
    const hostPid = { hostPID: true, containers: [{ name: "c", image: "x" }] };
    expect(podSecurityRefusal([change("ops", hostPid)], levelOf, "team")).toBeUndefined();
    const r = podSecurityRefusal(
      [{ op: "delete" }, change("ops", hostPid), change("team", hostPid)],
      levelOf,
      "team",
    );
    expect(r).toMatchObject({ index: 2, object: "Deployment team/web", level: "baseline" });
    expect(r?.message).toBe(
      'Deployment team/web: violates PodSecurity "baseline:latest" of namespace team: host namespaces (hostPID=true)',
    );
    // Without a namespace, the GitTarget's namespace counts.
    expect(podSecurityRefusal([change(undefined, hostPid)], levelOf, "ops")).toBeUndefined();
    expect(podSecurityRefusal([change(undefined, hostPid)], levelOf, "team")?.index).toBe(0);
  });
});
