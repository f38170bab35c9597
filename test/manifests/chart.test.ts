/**
 * The Helm chart (manifests/chart) and the kustomize manifests are one install in two forms: for each
 * choice a user makes (defaults, monitoring, webhook applier, Flux or Argo CD sidecar, external
 * Redis), `helm template` renders exactly what `kubectl kustomize` builds for the equivalent
 * overlay, object by object and field by field (kinds, names, RBAC rules, args, env, ports, probes,
 * security contexts and the rest), but for Helm's own labels and the objects listed with a reason.
 * A change to one side alone fails here; the planted changes below show it does.
 */
import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { parseRedisUrl } from "../../queue/redis-url.js";
import { CHART_COPIES } from "./chart-files.js";
import {
  CHART_DIR,
  compareBuilds,
  diffValues,
  type Expected,
  HELM,
  helm,
  keyOf,
  RELEASE_NAMESPACE,
  renderChart,
} from "./helm.js";
import { build, find, type K8sObject, KUBECTL_AVAILABLE, OVERLAYS, REPO_ROOT } from "./kustomize.js";
import { validateObject } from "./validators.js";

if ("missing" in HELM)
  console.warn(
    `\n!!! SKIPPED the Helm chart's tests (test/manifests/chart.test.ts): ${HELM.missing}. The chart and the kustomize manifests are NOT compared.\n`,
  );
const canRender = "path" in HELM && KUBECTL_AVAILABLE;

const read = (path: string) => readFileSync(resolve(REPO_ROOT, path), "utf8");
const secret = (namespace: string, why: string) => ({ [`Secret ${namespace}/applygate-redis`]: why });
const REDIS_SECRET =
  "the chart makes Secret applygate-redis (kustomize users create it by hand, docs/install.md, Secrets for Redis)";
const NAMESPACE = {
  "Namespace applygate-system":
    "Helm installs into a namespace made by --create-namespace or beforehand (docs/install.md labels it)",
};

const ALL_MONITORING = {
  serviceMonitor: { enabled: true },
  podMonitor: { enabled: true },
  prometheusRule: { enabled: true },
  grafanaDashboard: { enabled: true },
};

/** The upstream applier objects of the test fixtures (the sidecar's own objects are labelled part-of). */
const ours = (objects: K8sObject[]) =>
  objects.filter((o) => o.metadata.labels?.["app.kubernetes.io/part-of"] === "applygate");

interface Variant {
  name: string;
  values: object;
  kustomize: () => K8sObject[];
  expected: Expected;
}

const VARIANTS: Variant[] = [
  {
    name: "the defaults = manifests/base",
    values: {},
    kustomize: () => build(OVERLAYS.base),
    expected: { onlyKustomize: NAMESPACE, onlyChart: secret(RELEASE_NAMESPACE, REDIS_SECRET) },
  },
  {
    name: "monitoring = manifests/base + manifests/monitoring",
    values: { monitoring: ALL_MONITORING },
    kustomize: () => [...build(OVERLAYS.base), ...build(OVERLAYS.monitoring)],
    expected: { onlyKustomize: NAMESPACE, onlyChart: secret(RELEASE_NAMESPACE, REDIS_SECRET) },
  },
  {
    name: "webhook.enabled = manifests/base + manifests/webhook",
    values: { webhook: { enabled: true } },
    kustomize: () => [...build(OVERLAYS.base), ...build(OVERLAYS.webhook)],
    expected: { onlyKustomize: NAMESPACE, onlyChart: secret(RELEASE_NAMESPACE, REDIS_SECRET) },
  },
  {
    name: "sidecars.flux.enabled = manifests/base + the manifests/flux component's objects",
    values: { sidecars: { flux: { enabled: true } } },
    kustomize: () => [...build(OVERLAYS.base), ...ours(build(OVERLAYS.flux))],
    expected: {
      onlyKustomize: NAMESPACE,
      onlyChart: {
        ...secret(RELEASE_NAMESPACE, REDIS_SECRET),
        ...secret("flux-system", "the sidecar's copy of the Redis URL, made by hand in docs/install.md"),
      },
    },
  },
  {
    name: "sidecars.argocd.enabled = manifests/base + the manifests/argocd component's objects",
    values: { sidecars: { argocd: { enabled: true } } },
    kustomize: () => [...build(OVERLAYS.base), ...ours(build(OVERLAYS.argocd))],
    expected: {
      onlyKustomize: NAMESPACE,
      onlyChart: {
        ...secret(RELEASE_NAMESPACE, REDIS_SECRET),
        ...secret("argocd", "the sidecar's copy of the Redis URL, made by hand in docs/install.md"),
      },
    },
  },
  {
    name: "redis.mode external = manifests/examples/external-redis",
    values: { redis: { mode: "external", url: "rediss://:secret@redis.example.internal:6380" } },
    kustomize: () => build(OVERLAYS.externalRedis),
    expected: { onlyKustomize: NAMESPACE, onlyChart: secret(RELEASE_NAMESPACE, REDIS_SECRET) },
  },
];

describe.skipIf(!canRender)("the Helm chart renders what kustomize builds", () => {
  for (const variant of VARIANTS) {
    it(variant.name, () => {
      const chart = renderChart(variant.values);
      const kustomize = variant.kustomize();
      expect(compareBuilds(kustomize, chart, variant.expected)).toEqual([]);
      // Not vacuous: every object of the build is compared, CRDs included.
      expect(chart.length).toBeGreaterThanOrEqual(kustomize.length);
      expect(chart.filter((o) => o.kind === "CustomResourceDefinition")).toHaveLength(9);
    });
  }

  it("every object the chart renders, with everything on, validates against its kind's schema", () => {
    const chart = renderChart({
      monitoring: ALL_MONITORING,
      webhook: { enabled: true },
      sidecars: { flux: { enabled: true }, argocd: { enabled: true } },
      dashboard: { user: "admin", password: "s3cret" },
    });
    expect(chart.length).toBeGreaterThan(50);
    for (const o of chart) expect(validateObject(structuredClone(o)), keyOf(o)).toEqual([]);
  });
});

describe.skipIf(!canRender)("a change to one side alone fails the comparison", () => {
  const dirs: string[] = [];
  const temp = () => {
    const dir = mkdtempSync(join(tmpdir(), "applygate-plant-"));
    dirs.push(dir);
    return dir;
  };
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  /** A copy of the chart with one template edited; the edit must change the file. */
  function plantedChart(file: string, from: string, to: string): string {
    const dir = join(temp(), "chart");
    cpSync(CHART_DIR, dir, { recursive: true });
    const text = readFileSync(join(dir, file), "utf8");
    expect(text).toContain(from);
    writeFileSync(join(dir, file), text.replace(from, to));
    return dir;
  }

  /** A copy of manifests/ with one file edited, built at `overlay` inside it. */
  function plantedBuild(file: string, from: string, to: string, overlay: string): K8sObject[] {
    const dir = join(temp(), "manifests");
    cpSync(resolve(REPO_ROOT, "manifests"), dir, { recursive: true });
    const text = readFileSync(join(dir, file), "utf8");
    expect(text).toContain(from);
    writeFileSync(join(dir, file), text.replace(from, to));
    return build(join(dir, overlay));
  }

  it("a port changed in the chart's gateway", () => {
    const chart = renderChart(
      {},
      plantedChart("templates/gateway.yaml", "containerPort: 8080", "containerPort: 8081"),
    );
    expect(compareBuilds(build(OVERLAYS.base), chart, VARIANTS[0]!.expected)).toEqual([
      "Deployment applygate-system/applygate-gateway .spec.template.spec.containers[0].ports[0].containerPort: 8080 != 8081 (kustomize != chart)",
    ]);
  });

  it("a verb added to the chart's Flux sidecar role", () => {
    const chart = renderChart(
      VARIANTS[3]!.values,
      plantedChart(
        "templates/sidecars.yaml",
        'resources: ["fluxclaims/status"]\n    verbs: ["patch"]',
        'resources: ["fluxclaims/status"]\n    verbs: ["patch", "update"]',
      ),
    );
    expect(compareBuilds(VARIANTS[3]!.kustomize(), chart, VARIANTS[3]!.expected)).toEqual([
      "ClusterRole applygate-sidecar-flux .rules[3].verbs: 1 items != 2 items (kustomize != chart)",
    ]);
  });

  it("a probe changed in manifests/base", () => {
    const kustomize = plantedBuild(
      "base/worker.yaml",
      "periodSeconds: 5\n            failureThreshold: 2",
      "periodSeconds: 7\n            failureThreshold: 2",
      "base",
    );
    expect(compareBuilds(kustomize, renderChart({}), VARIANTS[0]!.expected)).toEqual([
      "Deployment applygate-system/applygate-worker .spec.template.spec.containers[0].readinessProbe.periodSeconds: 7 != 5 (kustomize != chart)",
    ]);
  });

  it("an alert changed in manifests/monitoring, the chart's copy not regenerated", () => {
    const kustomize = [
      ...build(OVERLAYS.base),
      ...plantedBuild("monitoring/prometheus-rule.yaml", "for: 2m", "for: 3m", "monitoring"),
    ];
    expect(compareBuilds(kustomize, renderChart(VARIANTS[1]!.values), VARIANTS[1]!.expected)).toEqual([
      'PrometheusRule applygate-system/applygate .spec.groups[0].rules[0].for: "3m" != "2m" (kustomize != chart)',
    ]);
  });
});

describe.skipIf(!canRender)("helm lint and the values schema", () => {
  it("passes helm lint --strict with the defaults and with everything on", () => {
    expect(helm(["lint", "--strict", CHART_DIR])).toMatch(/1 chart\(s\) linted, 0 chart\(s\) failed/);
    const dir = mkdtempSync(join(tmpdir(), "applygate-lint-"));
    try {
      const file = join(dir, "values.yaml");
      writeFileSync(
        file,
        JSON.stringify({
          monitoring: ALL_MONITORING,
          webhook: { enabled: true },
          sidecars: { flux: { enabled: true }, argocd: { enabled: true } },
          redis: { mode: "sentinel", password: "p", sentinel: { hosts: ["s-0:26379", "s-1"] } },
        }),
      );
      expect(helm(["lint", "--strict", CHART_DIR, "--values", file])).toMatch(/0 chart\(s\) failed/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("packages into the archive an OCI registry takes: CRDs, schema and files in, the examples out", () => {
    const dir = mkdtempSync(join(tmpdir(), "applygate-package-"));
    try {
      expect(helm(["package", CHART_DIR, "--destination", dir])).toMatch(/applygate-0\.\d+\.\d+.*\.tgz/);
      const archive = join(dir, `applygate-${parse(read("manifests/chart/Chart.yaml")).version}.tgz`);
      const entries = execFileSync("tar", ["tzf", archive], { encoding: "utf8" }).trim().split("\n");
      expect(entries.filter((e) => e.startsWith("applygate/crds/"))).toHaveLength(9);
      for (const file of [
        "values.schema.json",
        "files/dashboard.json",
        "files/prometheus-rule.yaml",
        "templates/NOTES.txt",
      ])
        expect(entries).toContain(`applygate/${file}`);
      expect(entries.filter((e) => e.includes("examples/"))).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuses a key it does not know, at the top and inside, and a wrong type", () => {
    expect(() => renderChart({ replicas: 3 })).toThrow(/additional properties 'replicas' not allowed/);
    expect(() => renderChart({ gateway: { replica: 3 } })).toThrow(
      /at '\/gateway': additional properties 'replica' not allowed/,
    );
    expect(() => renderChart({ gateway: { resources: { limit: { memory: "1Gi" } } } })).toThrow(
      /additional properties 'limit' not allowed/,
    );
    expect(() => renderChart({ redis: { mode: "cluster" } })).toThrow(/\/redis\/mode/);
    expect(() => renderChart({ worker: { replicas: "2" } })).toThrow(/\/worker\/replicas/);
  });

  it("says what is missing for an external Redis or Sentinel without a URL or hosts", () => {
    expect(() => renderChart({ redis: { mode: "external" } })).toThrow(/redis.url is required/);
    expect(() => renderChart({ redis: { mode: "sentinel" } })).toThrow(/redis.sentinel.hosts is required/);
    // With a Secret of the user's, the chart needs neither and makes no Secret.
    const chart = renderChart({ redis: { mode: "external", existingSecret: "my-redis" } });
    expect(chart.filter((o) => o.kind === "Secret")).toEqual([]);
    const gateway = find(chart, "Deployment", "applygate-gateway") as any;
    expect(gateway.spec.template.spec.containers[0].env[0].valueFrom.secretKeyRef).toEqual({
      name: "my-redis",
      key: "url",
    });
  });
});

describe.skipIf(!canRender)("every value lands where docs/helm-values.md says", () => {
  const placement = {
    nodeSelector: { pool: "system" },
    tolerations: [{ key: "dedicated", operator: "Equal", value: "system", effect: "NoSchedule" }],
    affinity: { nodeAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [] } },
    priorityClassName: "platform",
  };
  const rule = { apiGroups: ["batch"], resources: ["jobs"], verbs: ["list", "watch"] };
  const chart = () =>
    renderChart({
      image: {
        repository: "registry.example.com/applygate",
        digest: `sha256:${"a".repeat(64)}`,
        pullPolicy: "Always",
      },
      imagePullSecrets: ["regcred"],
      gateway: {
        replicas: 3,
        extraArgs: ["--log-level=debug"],
        podDisruptionBudget: { minAvailable: "50%" },
        ...placement,
      },
      worker: { replicas: 4, podDisruptionBudget: { enabled: false }, ...placement },
      mirror: { extraArgs: ["--resolve-interval=1m"], ...placement },
      redis: {
        persistence: { size: "20Gi", storageClassName: "fast" },
        image: { repository: "mirror.example.com/redis", tag: "7.4.3-alpine", pullPolicy: "Always" },
        resources: { requests: { memory: "1Gi" } },
        ...placement,
      },
      webhook: { enabled: true, extraArgs: ["--webhook-refuse-private"], extraRules: [rule], ...placement },
      sidecars: {
        flux: {
          enabled: true,
          namespace: "gitops",
          serviceAccount: "kc",
          podLabels: { app: "kc" },
          extraRules: [rule],
        },
        argocd: { enabled: true, extraRules: [rule] },
      },
      monitoring: {
        labels: { release: "kube-prometheus-stack" },
        serviceMonitor: { enabled: true, interval: "15s" },
        podMonitor: { enabled: true, interval: "20s", sidecarNamespaces: ["gitops"] },
        prometheusRule: { enabled: true, runbookBase: "https://docs.example.com/applygate/operations" },
        grafanaDashboard: { enabled: true, labels: { grafana_dashboard: "applygate" } },
      },
    });

  it("places pods, images, args, rules, volumes and labels as set", () => {
    const objects = chart();
    for (const o of objects) expect(validateObject(structuredClone(o)), keyOf(o)).toEqual([]);
    const pod = (kind: string, name: string) => (find(objects, kind, name) as any).spec.template.spec;
    for (const [kind, name] of [
      ["Deployment", "applygate-gateway"],
      ["Deployment", "applygate-worker"],
      ["Deployment", "applygate-mirror"],
      ["Deployment", "applygate-webhook"],
      ["StatefulSet", "applygate-redis"],
    ] as const) {
      const spec = pod(kind, name);
      expect({ ...spec, containers: undefined }, name).toMatchObject({
        ...placement,
        imagePullSecrets: [{ name: "regcred" }],
      });
    }
    const gateway = pod("Deployment", "applygate-gateway").containers[0];
    expect(gateway.image).toBe(`registry.example.com/applygate@sha256:${"a".repeat(64)}`);
    expect(gateway.imagePullPolicy).toBe("Always");
    expect(gateway.args).toEqual(["gateway", "--log-level=debug"]);
    expect(pod("Deployment", "applygate-mirror").containers[0].args).toEqual([
      "mirror",
      "--resolve-interval=1m",
    ]);
    expect(pod("Deployment", "applygate-webhook").containers[0].args).toEqual([
      "sidecar",
      "--applier",
      "webhook",
      "--webhook-refuse-private",
    ]);
    expect((find(objects, "Deployment", "applygate-gateway") as any).spec.replicas).toBe(3);
    expect((find(objects, "Deployment", "applygate-worker") as any).spec.replicas).toBe(4);
    expect((find(objects, "PodDisruptionBudget", "applygate-gateway") as any).spec.minAvailable).toBe("50%");
    expect(objects.filter((o) => o.kind === "PodDisruptionBudget").map((o) => o.metadata.name)).toEqual([
      "applygate-gateway",
    ]);

    const redis = find(objects, "StatefulSet", "applygate-redis") as any;
    expect(redis.spec.template.spec.containers[0].image).toBe("mirror.example.com/redis:7.4.3-alpine");
    // Helm merges a map given with the default: the other keys stay.
    expect(redis.spec.template.spec.containers[0].resources).toEqual({
      requests: { cpu: "100m", memory: "1Gi" },
      limits: { memory: "1Gi" },
    });
    expect(redis.spec.volumeClaimTemplates[0].spec).toMatchObject({
      storageClassName: "fast",
      resources: { requests: { storage: "20Gi" } },
    });

    for (const role of ["applygate-webhook", "applygate-sidecar-flux", "applygate-sidecar-argocd"])
      expect((find(objects, "ClusterRole", role) as any).rules.at(-1), role).toEqual(rule);
    const binding = find(objects, "ClusterRoleBinding", "applygate-sidecar-flux") as any;
    expect(binding.subjects).toEqual([{ kind: "ServiceAccount", name: "kc", namespace: "gitops" }]);
    const np = objects.find((o) => o.kind === "NetworkPolicy" && o.metadata.namespace === "gitops") as any;
    expect(np.spec.podSelector).toEqual({ matchLabels: { app: "kc" } });
    expect(
      objects
        .filter((o) => o.kind === "Secret")
        .map((o) => o.metadata.namespace)
        .sort(),
    ).toEqual(["applygate-system", "argocd", "gitops"].sort());

    for (const [kind, name] of [
      ["ServiceMonitor", "applygate"],
      ["PodMonitor", "applygate"],
      ["PodMonitor", "applygate-sidecar"],
      ["PrometheusRule", "applygate"],
    ] as const)
      expect(find(objects, kind, name).metadata.labels?.release, `${kind} ${name}`).toBe(
        "kube-prometheus-stack",
      );
    expect((find(objects, "ServiceMonitor", "applygate") as any).spec.endpoints[0].interval).toBe("15s");
    const sidecarMonitor = find(objects, "PodMonitor", "applygate-sidecar") as any;
    expect(sidecarMonitor.spec.namespaceSelector.matchNames).toEqual(["gitops"]);
    expect(sidecarMonitor.spec.podMetricsEndpoints[0].interval).toBe("20s");
    const urls = (find(objects, "PrometheusRule", "applygate") as any).spec.groups
      .flatMap((g: any) => g.rules)
      .map((r: any) => r.annotations.runbook_url);
    expect(urls.length).toBeGreaterThan(5);
    for (const url of urls)
      expect(url).toMatch(/^https:\/\/docs\.example\.com\/applygate\/operations#applygate[a-z]+$/);
    expect(find(objects, "ConfigMap", "applygate-dashboard").metadata.labels?.grafana_dashboard).toBe(
      "applygate",
    );
  });

  it("leaves out what is turned off", () => {
    const objects = renderChart({
      mirror: { enabled: false },
      networkPolicies: { enabled: false },
      approvalPolicy: { enabled: false },
      gateway: { podDisruptionBudget: { enabled: false }, resources: { limits: null } },
      worker: { podDisruptionBudget: { enabled: false } },
      webhook: { enabled: true },
      sidecars: { flux: { enabled: true } },
    });
    const kinds = new Set(objects.map((o) => o.kind));
    for (const kind of [
      "NetworkPolicy",
      "ValidatingAdmissionPolicy",
      "ValidatingAdmissionPolicyBinding",
      "PodDisruptionBudget",
    ])
      expect(kinds, kind).not.toContain(kind);
    expect(objects.filter((o) => o.metadata.name.startsWith("applygate-mirror"))).toEqual([]);
    // A key set to null is dropped from its default map.
    const gateway = find(objects, "Deployment", "applygate-gateway") as any;
    expect(gateway.spec.template.spec.containers[0].resources).toEqual({
      requests: { cpu: "100m", memory: "192Mi" },
    });
    expect(
      objects
        .filter((o) => o.kind === "Deployment")
        .map((o) => o.metadata.name)
        .sort(),
    ).toEqual(["applygate-gateway", "applygate-webhook", "applygate-worker"]);
  });
});

describe.skipIf(!canRender)("the Secrets the chart makes", () => {
  const data = (o: K8sObject, key: string) =>
    Buffer.from((o as any).data[key] as string, "base64").toString("utf8");

  it("bundled: one generated password, in the Redis Secret's password and in every URL, the sidecars' copies too", () => {
    const chart = renderChart({ sidecars: { flux: { enabled: true }, argocd: { enabled: true } } });
    const secrets = chart.filter((o) => o.kind === "Secret" && o.metadata.name === "applygate-redis");
    const main = secrets.find((o) => o.metadata.namespace === RELEASE_NAMESPACE)!;
    expect(secrets.map((o) => o.metadata.namespace).sort()).toEqual(
      ["applygate-system", "argocd", "flux-system"].sort(),
    );
    const password = data(main, "password");
    expect(password).toMatch(/^[A-Za-z0-9]{40}$/);
    for (const s of secrets) {
      expect(data(s, "url")).toBe(`redis://:${password}@applygate-redis.applygate-system.svc:6379`);
      // A sidecar's namespace gets the URL only.
      if (s !== main) expect(Object.keys((s as any).data)).toEqual(["url"]);
    }
    // Rendered again (a fresh install): another password.
    expect(data(find(renderChart({}), "Secret", "applygate-redis"), "password")).not.toBe(password);
  });

  it("sentinel: a URL the processes parse back into the same hosts, master, database and passwords", () => {
    const chart = renderChart({
      redis: {
        mode: "sentinel",
        password: "p@ss w+rd:/",
        sentinel: {
          hosts: ["s-0.redis:26379", "s-1.redis"],
          masterName: "primary",
          db: 2,
          password: "a&b=c",
          tls: true,
        },
      },
    });
    const url = data(find(chart, "Secret", "applygate-redis"), "url");
    expect(parseRedisUrl(url)).toEqual({
      kind: "sentinel",
      sentinels: [
        { host: "s-0.redis", port: 26379 },
        { host: "s-1.redis", port: 26379 },
      ],
      masterName: "primary",
      db: 2,
      password: "p@ss w+rd:/",
      sentinelPassword: "a&b=c",
      tls: true,
    });
    expect(chart.filter((o) => o.kind === "StatefulSet")).toEqual([]);
  });

  it("the dashboard's credentials, named by the gateway", () => {
    const chart = renderChart({ dashboard: { user: "admin", password: "s3cret" } });
    const s = find(chart, "Secret", "applygate-dashboard");
    expect([data(s, "user"), data(s, "password")]).toEqual(["admin", "s3cret"]);
    expect(Object.keys((s as any).data).sort()).toEqual(["password", "user"]);
    expect(renderChart({}).filter((o) => o.metadata.name === "applygate-dashboard")).toEqual([]);
    expect(() => renderChart({ dashboard: { user: "admin" } })).toThrow(/go together/);
    const named = renderChart({ dashboard: { existingSecret: "board" } });
    const env = (find(named, "Deployment", "applygate-gateway") as any).spec.template.spec.containers[0].env;
    expect(
      env
        .filter((e: any) => e.name.startsWith("APPLYGATE_DASHBOARD_"))
        .map((e: any) => e.valueFrom.secretKeyRef.name),
    ).toEqual(["board", "board", "board"]);
    expect(named.filter((o) => o.kind === "Secret" && o.metadata.name !== "applygate-redis")).toEqual([]);
  });
});

describe("the chart's sources", () => {
  const chartYaml = parse(read("manifests/chart/Chart.yaml"));
  const pkg = JSON.parse(read("package.json"));

  it("has the version of package.json, and the image tag the kustomize versions component sets", () => {
    expect(chartYaml.version).toBe(pkg.version);
    expect(chartYaml.appVersion).toBe(pkg.version);
    const versions = parse(read("manifests/components/versions/kustomization.yaml"));
    const image = versions.images.find((i: any) => i.name === "applygate");
    expect(image.newTag).toBe(chartYaml.appVersion);
    const values = parse(read("manifests/chart/values.yaml"));
    expect(values.image.repository).toBe(image.newName);
    expect(values.image.tag).toBe("");
  });

  it("reads files that are byte-equal to their source in manifests/monitoring (npm run gen:chart)", () => {
    for (const { from, to } of CHART_COPIES)
      expect(read(to), `${to} is stale: run npm run gen:chart`).toBe(read(from));
  });

  it("has a schema whose tree of keys is values.yaml's, every object closed", () => {
    const schema = JSON.parse(read("manifests/chart/values.schema.json"));
    const values = parse(read("manifests/chart/values.yaml"));
    /** The keys of values.yaml down to the leaves; a map meant for the user's keys is a leaf. */
    const walk = (node: any, s: any, path: string): string[] => {
      // Resources are Kubernetes' shape, where requests and limits are each optional.
      if (s.type !== "object" || !s.properties || path.endsWith("resources")) return [path];
      expect(s.additionalProperties, `${path || "(top)"} is closed`).toBe(false);
      expect(Object.keys(node).sort(), path).toEqual(Object.keys(s.properties).sort());
      expect((s.required ?? []).sort(), `${path}: every key required`).toEqual(
        Object.keys(s.properties).sort(),
      );
      return Object.keys(node).flatMap((k) => walk(node[k], s.properties[k], path ? `${path}.${k}` : k));
    };
    const leaves = walk(values, schema, "");
    expect(leaves.length).toBeGreaterThan(60);
  });

  it("documents every value in docs/helm-values.md", () => {
    const schema = JSON.parse(read("manifests/chart/values.schema.json"));
    const leaves: string[] = [];
    const walk = (s: any, path: string) => {
      if (s.type === "object" && s.properties && !path.endsWith("resources"))
        for (const [k, v] of Object.entries(s.properties)) walk(v, path ? `${path}.${k}` : k);
      else leaves.push(path);
    };
    walk(schema, "");
    const doc = read("docs/helm-values.md");
    const missing = leaves.filter((l) => !doc.includes(`\`${l}\``));
    expect(missing).toEqual([]);
  });
});

describe.skipIf(!KUBECTL_AVAILABLE)(
  "the sidecar through the flux2 and argo-cd charts' values (manifests/chart/examples)",
  () => {
    for (const [overlay, file, kind, name, where, appContainer] of [
      ["flux", "flux2-values.yaml", "Deployment", "kustomize-controller", "kustomizeController", "manager"],
      // argo-helm names the controller's container application-controller (upstream's install.yaml
      // argocd-application-controller), so the default-container annotation differs from the patch's.
      [
        "argocd",
        "argo-cd-values.yaml",
        "StatefulSet",
        "argocd-application-controller",
        "controller",
        "application-controller",
      ],
    ] as const) {
      it(`${file}: the container, labels, annotation and volume of manifests/${overlay}/sidecar/patch.yaml`, () => {
        const values = parse(read(`manifests/chart/examples/${file}`))[where];
        const workload = find(build(OVERLAYS[overlay]), kind, name) as any;
        const template = workload.spec.template;
        const patched = template.spec.containers.find((c: any) => c.name === "applygate-sidecar");
        expect(patched.image).toMatch(/^ghcr\.io\/applygate\/applygate:/);

        if (overlay === "flux") {
          // flux2 has no extraContainers: a native sidecar, the patch's container plus restartPolicy Always.
          const [container, ...others] = values.initContainers;
          expect(others).toEqual([]);
          expect(container.restartPolicy).toBe("Always");
          const { restartPolicy: _, ...rest } = container;
          expect(diffValues(patched, rest)).toEqual([]);
          expect(values.labels).toEqual({ "applygate.dev/redis-client": "true" });
          expect(values.annotations).toEqual({ "kubectl.kubernetes.io/default-container": appContainer });
        } else {
          expect(values.extraContainers).toHaveLength(1);
          expect(diffValues(patched, values.extraContainers[0])).toEqual([]);
          expect(values.podLabels).toEqual({ "applygate.dev/redis-client": "true" });
          expect(values.podAnnotations).toEqual({ "kubectl.kubernetes.io/default-container": appContainer });
        }
        // The patch's own pod labels and annotations, but for the container the annotation names.
        expect(template.metadata.labels["applygate.dev/redis-client"]).toBe("true");
        expect(Object.keys(template.metadata.annotations)).toEqual([
          "kubectl.kubernetes.io/default-container",
        ]);
        expect(values.volumes).toEqual(template.spec.volumes.filter((v: any) => v.name === "applygate-tmp"));
        // The ServiceAccount the chart's sidecars.<kind>.serviceAccount binds is the pod's.
        const chartValues = parse(read("manifests/chart/values.yaml"));
        const sidecar = chartValues.sidecars[overlay];
        expect(sidecar.serviceAccount).toBe(template.spec.serviceAccountName);
        for (const [k, v] of Object.entries(sidecar.podLabels))
          expect(template.metadata.labels[k], k).toBe(v);
      });
    }
  },
);
