import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { gatewaySettings } from "../../gateway/main.js";
import { argoCDClaim, fluxClaim, gitProvider, gitTarget } from "../../queue/crds/index.js";
import { workerSettings } from "../../queue/worker-main.js";
import { REFUSED_RANGES } from "../../sidecar/webhook/address.js";
import { build, find, type K8sObject, KUBECTL_AVAILABLE, OVERLAYS, REPO_ROOT } from "./kustomize.js";
import { validateObject } from "./validators.js";

const built: Record<string, K8sObject[]> = {};

type Container = {
  name: string;
  image: string;
  args?: string[];
  ports?: { name?: string; containerPort: number }[];
  securityContext?: Record<string, any>;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  livenessProbe?: unknown;
  readinessProbe?: unknown;
  env?: { name: string; valueFrom?: any }[];
};
type Workload = K8sObject & {
  spec: {
    template: {
      metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> };
      spec: Record<string, any>;
    };
  };
};

function podSpec(o: K8sObject): { containers: Container[]; [k: string]: any } {
  return (o as Workload).spec.template.spec as { containers: Container[] };
}

describe.skipIf(!KUBECTL_AVAILABLE)("kubectl kustomize", () => {
  beforeAll(() => {
    for (const [name, dir] of Object.entries(OVERLAYS)) built[name] = build(dir);
  });

  it("builds every overlay, and every object validates against its kind's schema", () => {
    for (const [name, objects] of Object.entries(built)) {
      expect(objects.length, `${name} built nothing`).toBeGreaterThan(0);
      for (const o of objects) {
        expect(validateObject(o), `${name}: ${o.kind} ${o.metadata.name}`).toEqual([]);
      }
    }
  });

  it("rejects a misspelt field (the schemas are closed, so the check above has teeth)", () => {
    const gateway = structuredClone(find(built.base!, "Deployment", "applygate-gateway"));
    podSpec(gateway).containers[0]!.securityContext!.readOnlyRootFileSystem = true;
    expect(validateObject(gateway).join("\n")).toMatch(/additional properties/);
    const target = structuredClone(find(built.examples!, "GitTarget", "apps-prod")) as any;
    target.spec.path = "/absolute";
    expect(validateObject(target).join("\n")).toMatch(/pattern/);
  });

  it("puts the control plane in applygate-system with our images from one place", () => {
    for (const o of built.base!) {
      if (o.kind === "Namespace" || o.kind.startsWith("Cluster") || o.kind === "CustomResourceDefinition") {
        expect(o.metadata.namespace).toBeUndefined();
      } else {
        expect(o.metadata.namespace, `${o.kind} ${o.metadata.name}`).toBe("applygate-system");
      }
    }
    const versions = parse(
      readFileSync(resolve(REPO_ROOT, "manifests/components/versions/kustomization.yaml"), "utf8"),
    );
    const expected = new Map<string, string>(
      versions.images.map((i: any) => [i.name, `${i.newName}:${i.newTag}`] as [string, string]),
    );
    const images = Object.values(built)
      .flat()
      .filter((o) => o.kind === "Deployment" || o.kind === "StatefulSet")
      .flatMap((o) => podSpec(o).containers)
      .filter(
        (c) =>
          c.name === "applygate-sidecar" || (!c.image.includes("fluxcd") && !c.image.includes("argoproj")),
      )
      .map((c) => c.image);
    expect(images.length).toBeGreaterThan(4);
    for (const image of images) expect([...expected.values()]).toContain(image);
  });

  it("runs every container of ours non-root, read-only, unprivileged, with probes and limits", () => {
    const ours = Object.values(built)
      .flat()
      .filter((o) => o.kind === "Deployment" || o.kind === "StatefulSet")
      .flatMap((o) =>
        podSpec(o).containers.map((c) => ({ where: `${o.kind} ${o.metadata.name}`, c, pod: podSpec(o) })),
      )
      .filter(({ c }) => c.image.startsWith("ghcr.io/applygate/") || c.image.startsWith("redis:"));
    expect(ours.length).toBeGreaterThanOrEqual(5);
    for (const { where, c, pod } of ours) {
      const sc = c.securityContext ?? {};
      const label = `${where}/${c.name}`;
      expect(sc.runAsNonRoot ?? pod.securityContext?.runAsNonRoot, label).toBe(true);
      expect(sc.readOnlyRootFilesystem, label).toBe(true);
      expect(sc.allowPrivilegeEscalation, label).toBe(false);
      expect(sc.capabilities?.drop, label).toEqual(["ALL"]);
      expect(c.livenessProbe, label).toBeDefined();
      // A sidecar's readiness would be its applier's pod's: it has none (docs/operations.md).
      if (c.name === "applygate-sidecar") expect(c.readinessProbe, label).toBeUndefined();
      else expect(c.readinessProbe, label).toBeDefined();
      expect(c.resources?.requests?.memory, label).toBeDefined();
      expect(c.resources?.limits?.memory, label).toBeDefined();
    }
  });

  it("serves the gateway on 8080 with its metrics on 9090, worker metrics on 9090, probes on /healthz and /readyz", () => {
    const gw = podSpec(find(built.base!, "Deployment", "applygate-gateway")).containers[0]!;
    const worker = podSpec(find(built.base!, "Deployment", "applygate-worker")).containers[0]!;
    expect(gw.args).toEqual(["gateway"]);
    expect(gw.ports).toEqual([
      { name: "http", containerPort: 8080, protocol: "TCP" },
      { name: "metrics", containerPort: 9090, protocol: "TCP" },
    ]);
    expect(worker.args).toEqual(["worker"]);
    expect(worker.ports).toEqual([{ name: "metrics", containerPort: 9090, protocol: "TCP" }]);
    // The processes listen there by default: the manifests set no port flag.
    expect(workerSettings.metricsPort.default).toBe(9090);
    expect(gatewaySettings.port.default).toBe(8080);
    expect(gatewaySettings.metricsPort.default).toBe(9090);
    for (const c of [gw, worker]) {
      expect((c.livenessProbe as any).httpGet.path).toBe("/healthz");
      expect((c.readinessProbe as any).httpGet.path).toBe("/readyz");
    }
  });

  it("guards the gateway with a PodDisruptionBudget and spreads replicas over nodes and zones", () => {
    const gateway = find(built.base!, "Deployment", "applygate-gateway") as Workload;
    const pdb = find(built.base!, "PodDisruptionBudget", "applygate-gateway") as any;
    expect(pdb.spec.selector.matchLabels).toEqual((gateway.spec as any).selector.matchLabels);
    for (const name of ["applygate-gateway", "applygate-worker"]) {
      const keys = podSpec(find(built.base!, "Deployment", name)).topologySpreadConstraints.map(
        (t: any) => t.topologyKey,
      );
      expect(keys).toEqual(["kubernetes.io/hostname", "topology.kubernetes.io/zone"]);
    }
  });

  it("runs Redis with AOF on a persistent volume, or drops it for an external Redis", () => {
    const redis = find(built.base!, "StatefulSet", "applygate-redis") as any;
    expect(redis.spec.volumeClaimTemplates[0].metadata.name).toBe("data");
    const conf = (find(built.base!, "ConfigMap", "applygate-redis") as any).data["redis.conf"] as string;
    expect(conf).toMatch(/^appendonly yes$/m);
    expect(conf).toMatch(/^maxmemory-policy noeviction$/m);
    const external = built.externalRedis!;
    expect(external.filter((o) => o.metadata.name === "applygate-redis")).toEqual([]);
    expect(external.filter((o) => o.kind === "Deployment")).toHaveLength(3);
    for (const d of external.filter((o) => o.kind === "Deployment")) {
      const env = podSpec(d).containers[0]!.env!.find((e) => e.name === "REDIS_URL");
      expect(env?.valueFrom?.secretKeyRef).toEqual({ name: "applygate-redis", key: "url" });
    }
  });

  for (const [overlay, kind, name, namespace, applier, appContainer, serviceAccount] of [
    ["flux", "Deployment", "kustomize-controller", "flux-system", "flux", "manager", "kustomize-controller"],
    [
      "argocd",
      "StatefulSet",
      "argocd-application-controller",
      "argocd",
      "argocd",
      "argocd-application-controller",
      "argocd-application-controller",
    ],
  ] as const) {
    it(`patches the sidecar into ${kind} ${namespace}/${name} and binds its RBAC to that pod's account`, () => {
      const patch = parse(
        readFileSync(resolve(REPO_ROOT, `manifests/${overlay}/sidecar/patch.yaml`), "utf8"),
      );
      // No namespace in the patch: upstream manifests may set none (see the argocdUpstream overlay).
      expect([patch.kind, patch.metadata.name, patch.metadata.namespace]).toEqual([kind, name, undefined]);
      const objects = built[overlay]!;
      const workload = find(objects, kind, name);
      const pod = podSpec(workload);
      expect(pod.containers.map((c) => c.name).sort()).toEqual([appContainer, "applygate-sidecar"].sort());
      const template = (workload as Workload).spec.template;
      expect(template.metadata?.annotations?.["kubectl.kubernetes.io/default-container"]).toBe(appContainer);
      const sidecar = pod.containers.find((c) => c.name === "applygate-sidecar")!;
      expect(sidecar.args).toEqual(["sidecar", "--applier", applier]);
      // A missing Secret must not keep the applier's pod from starting.
      const redisUrl = sidecar.env!.find((e) => e.name === "REDIS_URL")!;
      expect(redisUrl.valueFrom.secretKeyRef).toEqual({
        name: "applygate-redis",
        key: "url",
        optional: true,
      });
      const tmp = pod.volumes.find((v: any) => v.name === "applygate-tmp");
      expect(tmp.emptyDir.sizeLimit, "a bounded cache volume").toBeDefined();
      expect((workload as Workload).spec.template.metadata?.labels?.["applygate.dev/redis-client"]).toBe(
        "true",
      );
      // The applier's own container and volumes are untouched by the merge.
      expect(pod.volumes.map((v: any) => v.name)).toContain("applygate-tmp");
      expect(pod.volumes.length).toBe(2);
      expect(pod.serviceAccountName).toBe(serviceAccount);
      for (const binding of objects.filter((o) => o.kind.endsWith("Binding")) as any[]) {
        expect(binding.subjects).toEqual([{ kind: "ServiceAccount", name: serviceAccount, namespace }]);
      }
    });
  }

  it("admits Prometheus to the sidecar's metrics port on the applier's pods (the appliers' own policies admit only theirs)", () => {
    for (const [overlay, kind, name] of [
      ["flux", "Deployment", "kustomize-controller"],
      ["argocd", "StatefulSet", "argocd-application-controller"],
    ] as const) {
      const objects = built[overlay]!;
      const workload = find(objects, kind, name) as Workload;
      const policy = find(objects, "NetworkPolicy", "applygate-sidecar-metrics") as any;
      expect(policy.metadata.namespace).toBe(workload.metadata.namespace);
      const labels = workload.spec.template.metadata?.labels ?? {};
      for (const [k, v] of Object.entries(policy.spec.podSelector.matchLabels)) expect(labels[k]).toBe(v);
      const sidecar = podSpec(workload).containers.find((c) => c.name === "applygate-sidecar")!;
      const port = sidecar.ports!.find((p) => p.name === "applygate-http")!.containerPort;
      expect(policy.spec.ingress.flatMap((i: any) => i.ports.map((p: any) => p.port))).toContain(port);
    }
  });

  it("walls the webhook applier's egress: its pods may reach no link-local or metadata range the address guard refuses", () => {
    const objects = built.webhook!;
    const deployment = find(objects, "Deployment", "applygate-webhook") as Workload;
    const policy = find(objects, "NetworkPolicy", "applygate-webhook-egress") as any;
    expect(policy.metadata.namespace).toBe(deployment.metadata.namespace);
    expect(policy.spec.policyTypes).toEqual(["Egress"]);
    const labels = deployment.spec.template.metadata?.labels ?? {};
    for (const [k, v] of Object.entries(policy.spec.podSelector.matchLabels)) expect(labels[k]).toBe(v);
    const blocks = policy.spec.egress.flatMap((r: any) => (r.to ?? []).filter((t: any) => t.ipBlock));
    const except = (cidr: string) => blocks.find((t: any) => t.ipBlock.cidr === cidr)?.ipBlock.except ?? [];
    // Loopback and "this network" never leave the pod: only the guard can refuse them.
    const local = ["127.0.0.0/8", "0.0.0.0/8", "::1/128", "::/128"];
    const routable = REFUSED_RANGES.filter((r) => r.group === "internal" && !local.includes(r.cidr));
    expect(routable.length).toBeGreaterThan(0);
    for (const r of routable) expect(except(r.cidr.includes(":") ? "::/0" : "0.0.0.0/0")).toContain(r.cidr);
    // Every rule naming no destination allows only DNS.
    for (const rule of policy.spec.egress.filter((r: any) => !r.to))
      expect(rule.ports.map((p: any) => p.port)).toEqual([53, 53]);
  });

  it("the guide's patch that refuses private ranges builds on manifests/webhook and excepts each private range the guard refuses", () => {
    const guide = readFileSync(resolve(REPO_ROOT, "docs/webhook-applier.md"), "utf8");
    const block = [...guide.matchAll(/```yaml\n([\s\S]*?)```/g)]
      .map((m) => m[1]!)
      .find((b) => b.includes("applygate-webhook-egress"));
    expect(block).toBeDefined();
    const dir = mkdtempSync(join(tmpdir(), "webhook-egress-"));
    try {
      const base = relative(dir, resolve(REPO_ROOT, "manifests/webhook"));
      writeFileSync(join(dir, "kustomization.yaml"), `resources:\n  - ${base}\n${block}`);
      const policy = find(build(dir), "NetworkPolicy", "applygate-webhook-egress") as any;
      expect(validateObject(policy)).toEqual([]);
      const except = policy.spec.egress
        .flatMap((r: any) => r.to ?? [])
        .filter((t: any) => t.ipBlock?.cidr === "0.0.0.0/0" || t.ipBlock?.cidr === "::/0")
        .flatMap((t: any) => t.ipBlock.except);
      for (const r of REFUSED_RANGES) if (r.group === "private") expect(except).toContain(r.cidr);
      // Nothing of the cluster is left open but Redis and the API server's addresses.
      expect(policy.spec.egress.some((r: any) => r.to?.some((t: any) => t.namespaceSelector))).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("adds the sidecar to upstream Argo CD's install.yaml, which names no namespace, under namespace: argocd", () => {
    const objects = built.argocdUpstream!;
    const controller = find(objects, "StatefulSet", "argocd-application-controller");
    expect(controller.metadata.namespace).toBe("argocd");
    expect(podSpec(controller).containers.map((c) => c.name)).toContain("applygate-sidecar");
  });

  it("ships example resources that both the CRD schema and the zod schema accept", () => {
    const parsers = {
      GitProvider: gitProvider,
      GitTarget: gitTarget,
      FluxClaim: fluxClaim,
      ArgoCDClaim: argoCDClaim,
    };
    const examples = built.examples!;
    expect(examples.map((o) => o.kind).sort()).toEqual(Object.keys(parsers).sort());
    for (const o of examples) {
      const zod = parsers[o.kind as keyof typeof parsers];
      expect(zod.safeParse(o).error?.issues ?? [], `${o.kind} ${o.metadata.name}`).toEqual([]);
    }
  });
});
