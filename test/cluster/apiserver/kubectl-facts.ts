/**
 * kubectl facts: what the real `kubectl` does against an API server — server-side apply and its
 * conflicts, printer columns, wait and watch, the generators' protobuf, every everyday verb,
 * workloads as they are stored (defaults, and who owns which field), managedFields through the
 * scale subresource, one Event under both groups and the server's Table of Events, and a
 * restricted identity's 403.
 *
 * Written once and run against two backends: the simulated API server with the kubectl on PATH
 * (kubectl.test.ts, the default suite) and a real kube-apiserver with etcd and the kubectl the real
 * tier builds (test/real/kubectl.real.test.ts). Where the two differ, the simulator is wrong
 * (test/real/RESULTS.md lists what was found).
 */
import { execFile, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { untilWith } from "../../support/wait.js";

const run = promisify(execFile);

/** One RBAC rule, as a Role has it. */
export interface KubectlRule {
  verbs: string[];
  apiGroups: string[];
  resources: string[];
}

export interface KubectlBackend {
  /** The kubectl binary to run. */
  kubectl: string;
  /** A kubeconfig of a cluster administrator. */
  kubeconfigPath: string;
  /** Installs a CRD and returns once its kind is served (listable). */
  installCrd(file: string): Promise<void>;
  /** The `kubectl get --raw` path for an API path (the simulator puts its token path in front). */
  rawPath(path: string): string;
  /** A user allowed only `rules` cluster-wide: its name as the server reports it, and a kubeconfig. */
  addUser(name: string, rules: KubectlRule[], dir: string): Promise<{ user: string; kubeconfigPath: string }>;
  stop(): Promise<void>;
}

export interface KubectlFactsOptions {
  backend: "simulated" | "real";
  start: () => Promise<KubectlBackend>;
  /** How long one condition may take here. */
  timeoutMs: number;
  /** Skips the whole set (no kubectl, or the real binaries are not built): `start` is never called. */
  skip?: boolean;
}

const ksYaml = (prune: boolean) => `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: apps
  namespace: default
spec:
  interval: 1m
  prune: ${prune}
  sourceRef:
    kind: GitRepository
    name: repo
`;

/** A one-container Deployment's spec as the real server stores it (apps/v1 and core/v1 defaults). */
function defaultedSpec(app: string, container: Record<string, unknown>, replicas = 1) {
  return {
    progressDeadlineSeconds: 600,
    replicas,
    revisionHistoryLimit: 10,
    selector: { matchLabels: { app } },
    strategy: { rollingUpdate: { maxSurge: "25%", maxUnavailable: "25%" }, type: "RollingUpdate" },
    template: {
      metadata: { labels: { app } },
      spec: {
        containers: [
          {
            name: "c",
            resources: {},
            terminationMessagePath: "/dev/termination-log",
            terminationMessagePolicy: "File",
            ...container,
          },
        ],
        dnsPolicy: "ClusterFirst",
        restartPolicy: "Always",
        schedulerName: "default-scheduler",
        securityContext: {},
        terminationGracePeriodSeconds: 30,
      },
    },
  };
}

/** Workloads as sent: defaults of every kind, and the pull policy's three cases. */
const WORKLOADS_YAML = `apiVersion: apps/v1
kind: Deployment
metadata: {name: rich, namespace: workloads}
spec:
  selector: {matchLabels: {app: rich}}
  template:
    metadata: {labels: {app: rich}}
    spec:
      initContainers:
      - {name: init, image: "registry.local:5000/tools/init", command: [sh]}
      containers:
      - name: c
        image: nginx:1.27
        ports: [{containerPort: 80, name: http}, {containerPort: 53, protocol: UDP}]
        env:
        - {name: A, value: "1"}
        - {name: POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
        volumeMounts: [{name: cfg, mountPath: /cfg}]
        livenessProbe: {httpGet: {port: 80}}
        readinessProbe: {tcpSocket: {port: 80}, periodSeconds: 5}
        resources: {limits: {cpu: 100m}}
      - name: d
        image: "ghcr.io/x/y@sha256:0123456789012345678901234567890123456789012345678901234567890123"
      - name: e
        image: "busybox:latest"
        imagePullPolicy: Never
      volumes:
      - {name: cfg, configMap: {name: cm}}
      - {name: sec, secret: {secretName: s}}
      - {name: tmp}
      - {name: proj, projected: {sources: [{serviceAccountToken: {path: t}}, {downwardAPI: {items: [{path: "nm", fieldRef: {fieldPath: metadata.name}}]}}]}}
      - {name: dapi, downwardAPI: {items: [{path: "nm", fieldRef: {fieldPath: metadata.name}}]}}
      - {name: hp, hostPath: {path: /x}}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: workloads}
spec:
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: c, image: "postgres:16"}]}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
`;

/** What the real server (v1.36.3) stored for WORKLOADS_YAML, and what `kubectl create` owns of it. */
const WORKLOADS_STORED = JSON.parse(
  readFileSync(fileURLToPath(new URL("./kubectl-facts.workloads.json", import.meta.url)), "utf8"),
);
const RICH_POD_SPEC = WORKLOADS_STORED.richPodSpec;
const RICH_CREATED_FIELDS = WORKLOADS_STORED.richCreatedFields;
const DB_SPEC = WORKLOADS_STORED.dbSpec;
const DB_STATUS = WORKLOADS_STORED.dbStatus;
const DB_CREATED_FIELDS = WORKLOADS_STORED.dbCreatedFields;

/**
 * How the server's printers write the time since `ts` when it is days or years ago (k8s.io
 * apimachinery duration.HumanDuration from 8 days on): `702d`, then `2y10d`, `2y`, from 8 years
 * `8y`. `accepts` takes the text for the time before or after the check, so a day's turn between
 * the server's clock and this one does not matter.
 */
function agoSince(ts: string): { accepts: (text: string) => boolean } {
  const text = (now: number) => {
    const days = Math.floor((now - Date.parse(ts)) / 86_400_000);
    const years = Math.floor(days / 365);
    if (days < 730) return `${days}d`;
    if (years < 8) return days % 365 === 0 ? `${years}y` : `${years}y${days % 365}d`;
    return `${years}y`;
  };
  const before = text(Date.now());
  return { accepts: (t) => t === before || t === text(Date.now()) };
}

export const KUSTOMIZATION_CRD = fileURLToPath(new URL("../crds/flux-kustomization.yaml", import.meta.url));

export function describeKubectlFacts(opts: KubectlFactsOptions): void {
  const until = untilWith({ timeoutMs: opts.timeoutMs, everyMs: 25 });

  describe.skipIf(opts.skip ?? false)(`API server with kubectl (${opts.backend})`, () => {
    let b: KubectlBackend;
    let dir: string;
    let kubeconfig: string;
    // Always async: the simulated server runs in this process, a synchronous child would block it.
    const kubectl = async (...args: string[]) => {
      try {
        const { stdout } = await run(b.kubectl, ["--kubeconfig", kubeconfig, ...args]);
        return { code: 0, out: stdout };
      } catch (e) {
        const err = e as { code?: number; stdout?: string; stderr?: string };
        return { code: err.code ?? 1, out: `${err.stdout ?? ""}${err.stderr ?? ""}` };
      }
    };
    /**
     * What `kubectl delete` prints: newer kubectl names the namespace too ("… deleted from verbs
     * namespace"; v1.36.3 does, v1.32.4 does not, v1.34 is the first release seen doing it); the
     * server's answer is the same either way.
     */
    let deletedLine: (what: string, ns?: string) => string;

    beforeAll(async () => {
      b = await opts.start();
      kubeconfig = b.kubeconfigPath;
      await b.installCrd(KUSTOMIZATION_CRD);
      dir = await mkdtemp(join(tmpdir(), "apiserver-kubectl-"));
      await writeFile(join(dir, "ks.yaml"), ksYaml(true));
      await writeFile(join(dir, "ks-other.yaml"), ksYaml(false));
      const version = JSON.parse((await run(b.kubectl, ["version", "--client", "-o", "json"])).stdout);
      const minor = Number.parseInt(version.clientVersion.minor, 10);
      deletedLine = (what, ns) => `${what} deleted${minor >= 34 && ns ? ` from ${ns} namespace` : ""}\n`;
    });
    afterAll(async () => {
      await b?.stop();
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    it("applies server-side, reports a conflict, and takes the field with --force-conflicts", async () => {
      const applied = await kubectl("apply", "--server-side", "-f", join(dir, "ks.yaml"));
      expect(applied).toMatchObject({ code: 0 });
      expect(applied.out).toContain("kustomization.kustomize.toolkit.fluxcd.io/apps serverside-applied");

      const yaml = await kubectl("get", "kustomization", "apps", "-o", "yaml", "--show-managed-fields");
      expect(yaml.out).toContain("manager: kubectl");
      expect(yaml.out).toContain("operation: Apply");
      expect(yaml.out).toContain("prune: true");

      const patched = await kubectl(
        "patch",
        "ks",
        "apps",
        "--type",
        "merge",
        "-p",
        '{"spec":{"prune":false}}',
      );
      expect(patched).toMatchObject({ code: 0 });
      const conflict = await kubectl(
        "apply",
        "--server-side",
        "--field-manager",
        "other",
        "-f",
        join(dir, "ks.yaml"),
      );
      expect(conflict.code).not.toBe(0);
      expect(conflict.out).toContain('conflict with "kubectl-patch"');
      expect(conflict.out).toContain(".spec.prune");

      const forced = await kubectl(
        "apply",
        "--server-side",
        "--field-manager",
        "other",
        "--force-conflicts",
        "-f",
        join(dir, "ks.yaml"),
      );
      expect(forced).toMatchObject({ code: 0 });
      const prune = await kubectl("get", "ks", "apps", "-o", "jsonpath={.spec.prune}");
      expect(prune.out).toBe("true");
    });

    it("prints printer columns, waits for a condition, follows a watch, and deletes", async () => {
      const table = await kubectl("get", "ks");
      expect(table.out).toMatch(/NAME\s+AGE\s+READY\s+STATUS/);
      expect(table.out).toMatch(/\napps\s/);

      const watcher = spawn(b.kubectl, [
        "--kubeconfig",
        kubeconfig,
        "get",
        "ks",
        "--watch",
        "--output-watch-events",
      ]);
      let watched = "";
      watcher.stdout.on("data", (d: Buffer) => {
        watched += d.toString();
      });
      const waiting = kubectl("wait", "--for=condition=Ready", "ks/apps", "--timeout=20s");
      const ready = JSON.stringify({
        status: {
          conditions: [
            {
              type: "Ready",
              status: "True",
              reason: "ReconciliationSucceeded",
              message: "Applied revision: main@sha1:0123",
              lastTransitionTime: "2025-01-01T00:00:00Z",
            },
          ],
        },
      });
      // kubectl get --watch has printed the object: it is connected (kubectl wait re-reads, so it need not be)
      await until(() => watched.includes("apps"), "kubectl get --watch to print the object");
      const status = await kubectl(
        "patch",
        "ks",
        "apps",
        "--subresource=status",
        "--type",
        "merge",
        "-p",
        ready,
      );
      expect(status).toMatchObject({ code: 0 });
      const waited = await waiting;
      expect(waited.out).toContain("condition met");

      const deleted = await kubectl("delete", "ks", "apps");
      expect(deleted.out).toContain('"apps" deleted');
      await until(() => watched.includes("DELETED"), "kubectl get --watch to print the deletion");
      watcher.kill();
      expect(watched).toContain("ADDED");
      expect(watched).toContain("MODIFIED");
      expect(watched).toMatch(/MODIFIED\s+apps\s+\S+\s+True\s+Applied revision: main@sha1:0123/);
      expect(watched).toContain("DELETED");
      const gone = await kubectl("get", "ks", "apps");
      expect(gone.out).toContain("NotFound");
    });

    it("creates built-in kinds from kubectl's generators, which send protobuf", async () => {
      expect(await kubectl("create", "namespace", "team-a")).toMatchObject({ code: 0 });
      const secret = await kubectl(
        "-n",
        "team-a",
        "create",
        "secret",
        "generic",
        "hook",
        "--from-literal=token=s3cret",
        "--from-literal=user=git",
      );
      expect(secret).toMatchObject({ code: 0, out: "secret/hook created\n" });
      const cm = await kubectl("-n", "team-a", "create", "configmap", "settings", "--from-literal=a=b");
      expect(cm).toMatchObject({ code: 0, out: "configmap/settings created\n" });
      expect(await kubectl("-n", "team-a", "create", "serviceaccount", "bot")).toMatchObject({ code: 0 });

      const ns = JSON.parse((await kubectl("get", "namespace", "team-a", "-o", "json")).out);
      expect(ns.status.phase).toBe("Active");
      expect(ns.metadata.labels).toEqual({ "kubernetes.io/metadata.name": "team-a" });
      const stored = JSON.parse(
        (await kubectl("-n", "team-a", "get", "secret", "hook", "-o", "json", "--show-managed-fields")).out,
      );
      expect(stored.type).toBe("Opaque");
      expect(Buffer.from(stored.data.token, "base64").toString()).toBe("s3cret");
      expect(stored.metadata.managedFields).toEqual([
        expect.objectContaining({ manager: "kubectl-create", operation: "Update" }),
      ]);
      const value = await kubectl("-n", "team-a", "get", "configmap", "settings", "-o", "jsonpath={.data.a}");
      expect(value.out).toBe("b");
      const again = await kubectl("create", "namespace", "team-a");
      expect(again.code).not.toBe(0);
      expect(again.out).toContain('namespaces "team-a" already exists');
    });

    it("answers every verb a user types: apply, edit, patch (three kinds), label, annotate, scale, delete, explain", async () => {
      const ns = ["-n", "verbs"];
      expect(await kubectl("create", "namespace", "verbs")).toMatchObject({ code: 0 });
      await writeFile(
        join(dir, "cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: verbs\ndata:\n  a: '1'\n",
      );
      expect(await kubectl("apply", "-f", join(dir, "cm.yaml"))).toMatchObject({
        code: 0,
        out: "configmap/app created\n",
      });
      await writeFile(
        join(dir, "cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: verbs\ndata:\n  a: '2'\n",
      );
      expect((await kubectl("apply", "-f", join(dir, "cm.yaml"))).out).toBe("configmap/app configured\n");
      expect((await kubectl("apply", "-f", join(dir, "cm.yaml"))).out).toBe("configmap/app unchanged\n");

      expect((await kubectl(...ns, "label", "cm", "app", "tier=web")).out).toBe("configmap/app labeled\n");
      expect((await kubectl(...ns, "annotate", "cm", "app", "note=hi")).out).toBe(
        "configmap/app annotated\n",
      );
      expect((await kubectl(...ns, "label", "cm", "app", "tier-")).out).toBe("configmap/app unlabeled\n");
      expect((await kubectl(...ns, "patch", "cm", "app", "-p", '{"data":{"b":"x"}}')).code).toBe(0);
      expect(
        (await kubectl(...ns, "patch", "cm", "app", "--type", "merge", "-p", '{"data":{"c":"y"}}')).code,
      ).toBe(0);
      const jsonPatch = await kubectl(
        ...ns,
        "patch",
        "cm",
        "app",
        "--type",
        "json",
        "-p",
        '[{"op":"remove","path":"/data/c"}]',
      );
      expect(jsonPatch).toMatchObject({ code: 0, out: "configmap/app patched\n" });
      const editor = join(dir, "editor.sh");
      await writeFile(editor, `#!/bin/sh\nsed -i 's/^  a: .*/  a: "edited"/' "$1"\n`, { mode: 0o755 });
      const edited = await run(b.kubectl, ["--kubeconfig", kubeconfig, ...ns, "edit", "cm", "app"], {
        env: { ...process.env, KUBE_EDITOR: editor },
      });
      expect(edited.stdout).toBe("configmap/app edited\n");

      const cm = JSON.parse(
        (await kubectl(...ns, "get", "cm", "app", "-o", "json", "--show-managed-fields")).out,
      );
      expect(cm.data).toEqual({ a: "edited", b: "x" });
      expect(cm.metadata.labels).toBeUndefined(); // no `labels: {}` left behind
      expect(cm.metadata.annotations.note).toBe("hi");
      // One entry per manager; the server sorts them by time to the second, then by manager
      // (fidelity-facts.ts holds that order on both backends), so which ones is the fact here.
      const managers = cm.metadata.managedFields.map((e: { manager: string; operation: string }) => [
        e.manager,
        e.operation,
      ]);
      expect([...managers].sort()).toEqual([
        ["kubectl-annotate", "Update"],
        ["kubectl-client-side-apply", "Update"],
        ["kubectl-edit", "Update"],
        ["kubectl-patch", "Update"],
      ]);

      await writeFile(
        join(dir, "deploy.yaml"),
        `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: verbs}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: busybox}]}
`,
      );
      const deployed = await kubectl("apply", "--server-side", "-f", join(dir, "deploy.yaml"));
      expect(deployed.code, deployed.out).toBe(0);
      const getDeploy = async () =>
        JSON.parse((await kubectl(...ns, "get", "deploy", "web", "-o", "json", "--show-managed-fields")).out);
      const applied = await getDeploy();
      // Stored defaulted, as its Go type writes it; the apply owns only what it sent, the selector
      // whole (a LabelSelector is atomic) and the container as an item of a list keyed by name.
      expect(applied.spec).toEqual(defaultedSpec("web", { image: "busybox", imagePullPolicy: "Always" }));
      expect(applied.status).toEqual({});
      const appliedFields = {
        "f:spec": {
          "f:replicas": {},
          "f:selector": {},
          "f:template": {
            "f:metadata": { "f:labels": { "f:app": {} } },
            "f:spec": {
              "f:containers": { 'k:{"name":"c"}': { ".": {}, "f:image": {}, "f:name": {} } },
            },
          },
        },
      };
      expect(applied.metadata.managedFields).toEqual([
        {
          manager: "kubectl",
          operation: "Apply",
          apiVersion: "apps/v1",
          time: expect.any(String),
          fieldsType: "FieldsV1",
          fieldsV1: appliedFields,
        },
      ]);
      expect((await kubectl(...ns, "scale", "deploy/web", "--replicas=3")).out).toBe(
        "deployment.apps/web scaled\n",
      );
      const deploy = await getDeploy();
      expect(deploy.spec.replicas).toBe(3);
      expect(deploy.metadata.generation).toBe(2);
      // The scale writer takes the replicas from the apply, which keeps its time; its own entry,
      // carried back from the Scale, has none (scale-facts below hold the whole rule).
      const { "f:replicas": _taken, ...rest } = appliedFields["f:spec"];
      expect(deploy.metadata.managedFields).toEqual([
        { ...applied.metadata.managedFields[0], fieldsV1: { "f:spec": rest } },
        {
          manager: "kubectl",
          operation: "Update",
          apiVersion: "apps/v1",
          fieldsType: "FieldsV1",
          fieldsV1: { "f:spec": { "f:replicas": {} } },
          subresource: "scale",
        },
      ]);
      const scale = JSON.parse(
        // --raw takes a path from the server's root: the token path prefix of the kubeconfig's server
        // (kubectl sends no bearer token over plain HTTP) goes in front of it.
        (await kubectl("get", "--raw", b.rawPath("/apis/apps/v1/namespaces/verbs/deployments/web/scale")))
          .out,
      );
      expect(scale).toMatchObject({ kind: "Scale", spec: { replicas: 3 }, status: { selector: "app=web" } });

      const explained = await kubectl("explain", "kustomization.spec.prune");
      expect(explained).toMatchObject({ code: 0 });
      expect(explained.out).toMatch(/FIELD: +prune <boolean>/);
      const configmap = (await kubectl("explain", "configmap")).out;
      expect(configmap).toContain("KIND:       ConfigMap");
      expect(configmap).toContain("ConfigMap holds configuration data for pods to consume.");
      expect(configmap.match(/^ {2}\w+\t<[^>]+>$/gm)).toEqual([
        "  apiVersion\t<string>",
        "  binaryData\t<map[string]string>",
        "  data\t<map[string]string>",
        "  immutable\t<boolean>",
        "  kind\t<string>",
        "  metadata\t<ObjectMeta>",
      ]);
      expect((await kubectl("explain", "kustomization")).out).toMatch(/^ {2}metadata\t<ObjectMeta>$/m);

      expect((await kubectl(...ns, "delete", "cm", "app")).out).toBe(deletedLine('configmap "app"', "verbs"));
      expect((await kubectl(...ns, "delete", "-f", join(dir, "deploy.yaml"))).out).toBe(
        deletedLine('deployment.apps "web"', "verbs"),
      );
      expect(await kubectl(...ns, "get", "cm,deploy", "-o", "name")).toEqual({ code: 0, out: "" });
    });

    it("stores workloads defaulted as the real server does, and kubectl create owns them field by field", async () => {
      expect(await kubectl("create", "namespace", "workloads")).toMatchObject({ code: 0 });
      await writeFile(join(dir, "workloads.yaml"), WORKLOADS_YAML);
      const created = await kubectl("create", "-f", join(dir, "workloads.yaml"));
      expect(created.code, created.out).toBe(0);
      const get = async (what: string) =>
        JSON.parse(
          (await kubectl("-n", "workloads", "get", what, "-o", "json", "--show-managed-fields")).out,
        );
      // A Deployment: apps/v1 and core/v1 defaults, the pull policy by tag (none or :latest: Always;
      // another tag or a digest: IfNotPresent; one given is kept), and the structs Go always writes.
      const rich = await get("deploy/rich");
      expect(rich.spec).toEqual({
        ...defaultedSpec("rich", {}),
        template: { metadata: { labels: { app: "rich" } }, spec: RICH_POD_SPEC },
      });
      expect(rich.status).toEqual({});
      // An Update owns every field it sent after defaulting; lists keyed as k8s.io/api declares them
      // (containers and volumes by name, ports by containerPort and protocol, env by name, mounts by
      // path); a field selector, an atomic list, the selector whole.
      expect(rich.metadata.managedFields).toEqual([
        {
          manager: "kubectl-create",
          operation: "Update",
          apiVersion: "apps/v1",
          time: expect.any(String),
          fieldsType: "FieldsV1",
          fieldsV1: RICH_CREATED_FIELDS,
        },
      ]);
      const db = await get("statefulset/db");
      expect(db.spec).toEqual(DB_SPEC);
      expect(db.status).toEqual(DB_STATUS);
      expect(db.metadata.managedFields).toEqual([expect.objectContaining({ fieldsV1: DB_CREATED_FIELDS })]);

      // An update that leaves a default out changes nothing: it is defaulted again.
      const { imagePullPolicy: _p, ...bare } = rich.spec.template.spec.containers[1];
      const patched = await kubectl(
        "-n",
        "workloads",
        "patch",
        "deploy/rich",
        "--type",
        "json",
        "-p",
        JSON.stringify([{ op: "replace", path: "/spec/template/spec/containers/1", value: bare }]),
      );
      expect(patched.code, patched.out).toBe(0);
      const after = await get("deploy/rich");
      expect(after.metadata.resourceVersion).toBe(rich.metadata.resourceVersion);
      expect(after.metadata.generation).toBe(1);
    });

    it("kubectl scale: managedFields as the scale subresource carries them to the Scale and back", async () => {
      const ns = ["-n", "scaled"];
      expect(await kubectl("create", "namespace", "scaled")).toMatchObject({ code: 0 });
      const manifest = (name: string, replicas?: number) =>
        `apiVersion: apps/v1
kind: Deployment
metadata: {name: ${name}, namespace: scaled}
spec:
${replicas === undefined ? "" : `  replicas: ${replicas}\n`}  selector: {matchLabels: {app: ${name}}}
  template:
    metadata: {labels: {app: ${name}}}
    spec: {containers: [{name: c, image: busybox}]}
`;
      type Entry = {
        manager: string;
        operation: string;
        subresource?: string;
        time?: string;
        fieldsV1: Record<string, Record<string, unknown>>;
      };
      const entries = async (name: string) => {
        const o = JSON.parse(
          (await kubectl(...ns, "get", "deploy", name, "-o", "json", "--show-managed-fields")).out,
        );
        return {
          rv: o.metadata.resourceVersion as string,
          replicas: o.spec.replicas as number,
          // manager/operation/subresource, whether it has a time, whether it owns the replicas
          owners: (o.metadata.managedFields as Entry[]).map((e) => [
            `${e.manager}/${e.operation}/${e.subresource ?? ""}`,
            e.time === undefined ? "no time" : "time",
            "f:replicas" in (e.fieldsV1["f:spec"] ?? {}) ? "replicas" : "-",
          ]),
        };
      };

      // Nobody owns the replicas (applied without them, defaulted to 1): the Scale has no
      // managedFields, and an update of an object without them is not tracked.
      await writeFile(join(dir, "unowned.yaml"), manifest("unowned"));
      expect((await kubectl("apply", "--server-side", "-f", join(dir, "unowned.yaml"))).code).toBe(0);
      expect((await kubectl(...ns, "scale", "deploy/unowned", "--replicas=3")).code).toBe(0);
      expect(await entries("unowned")).toMatchObject({
        replicas: 3,
        owners: [["kubectl/Apply/", "time", "-"]],
      });
      // An Update that owns them (kubectl patch) hands them to the scale writer, whose entry has no time.
      expect((await kubectl(...ns, "patch", "deploy/unowned", "-p", '{"spec":{"replicas":5}}')).code).toBe(0);
      expect((await kubectl(...ns, "scale", "deploy/unowned", "--replicas=6")).code).toBe(0);
      expect(await entries("unowned")).toMatchObject({
        replicas: 6,
        owners: [
          ["kubectl/Apply/", "time", "-"],
          ["kubectl/Update/scale", "no time", "replicas"],
        ],
      });

      // A scale to the replicas an Update entry owns changes no value, yet the entry comes back from
      // the Scale split: the replicas under the same identity with no time, the rest with its time.
      await writeFile(join(dir, "csa.yaml"), manifest("csa", 1));
      expect((await kubectl("apply", "-f", join(dir, "csa.yaml"))).code).toBe(0);
      const before = await entries("csa");
      expect(before.owners).toEqual([["kubectl-client-side-apply/Update/", "time", "replicas"]]);
      expect((await kubectl(...ns, "scale", "deploy/csa", "--replicas=1")).code).toBe(0);
      const split = await entries("csa");
      expect(split.rv).not.toBe(before.rv);
      expect(split.owners).toEqual([
        ["kubectl-client-side-apply/Update/", "no time", "replicas"],
        ["kubectl-client-side-apply/Update/", "time", "-"],
      ]);
      // The next write reads one entry per identity, the later: the replicas have no owner now, so
      // this scale is not tracked either.
      expect((await kubectl(...ns, "scale", "deploy/csa", "--replicas=2")).code).toBe(0);
      expect(await entries("csa")).toMatchObject({
        replicas: 2,
        owners: [["kubectl-client-side-apply/Update/", "time", "-"]],
      });
    });

    it("serves one Event under both groups: kubectl get events and describe show what events.k8s.io/v1 recorded", async () => {
      const ns = ["-n", "evented"];
      expect(await kubectl("create", "namespace", "evented")).toMatchObject({ code: 0 });
      await writeFile(
        join(dir, "ks-evented.yaml"),
        ksYaml(true).replace("name: apps\n  namespace: default", "name: held\n  namespace: evented"),
      );
      expect((await kubectl("apply", "--server-side", "-f", join(dir, "ks-evented.yaml"))).code).toBe(0);
      const uid = (await kubectl(...ns, "get", "ks", "held", "-o", "jsonpath={.metadata.uid}")).out;
      // Recorded as the sidecar records its Events: events.k8s.io/v1, with action and a series.
      await writeFile(
        join(dir, "event-v1.yaml"),
        `apiVersion: events.k8s.io/v1
kind: Event
metadata: {name: held.suspended, namespace: evented}
eventTime: "2025-01-01T00:00:00.000000Z"
reportingController: applygate.dev/sidecar
reportingInstance: sidecar-0
action: Suspend
reason: Adopted
note: held by its claim
type: Normal
regarding: {apiVersion: kustomize.toolkit.fluxcd.io/v1, kind: Kustomization, namespace: evented, name: held, uid: ${uid}}
`,
      );
      const recorded = await kubectl("create", "-f", join(dir, "event-v1.yaml"));
      expect(recorded.code, recorded.out).toBe(0);
      // Recorded the old way: core v1, as kubectl and most controllers still do.
      await writeFile(
        join(dir, "event-core.yaml"),
        `apiVersion: v1
kind: Event
metadata: {name: held.reconciled, namespace: evented}
involvedObject: {apiVersion: kustomize.toolkit.fluxcd.io/v1, kind: Kustomization, namespace: evented, name: held, uid: ${uid}}
reason: ReconciliationSucceeded
message: applied revision main@sha1:0123
type: Normal
source: {component: kustomize-controller}
firstTimestamp: "2025-01-01T00:00:01Z"
lastTimestamp: "2025-01-01T00:00:01Z"
count: 1
`,
      );
      expect((await kubectl("create", "-f", join(dir, "event-core.yaml"))).code).toBe(0);

      // kubectl get events prints the server's Table: no NAME column first; LAST SEEN from
      // lastTimestamp, else the first time (firstTimestamp, else eventTime); OBJECT as kind/name.
      const ago = agoSince("2025-01-01T00:00:00Z");
      const core = await kubectl(...ns, "get", "events");
      expect(core.code, core.out).toBe(0);
      const rows = core.out.split("\n");
      expect(rows[0]).toMatch(/^LAST SEEN\s+TYPE\s+REASON\s+OBJECT\s+MESSAGE$/);
      const seen = (row: string | undefined) => row?.split(/\s+/)[0] ?? "";
      const adopted = rows.find((r) => r.includes("Adopted"));
      expect(adopted).toMatch(/^\S+\s+Normal\s+Adopted\s+kustomization\/held\s+held by its claim$/);
      expect(ago.accepts(seen(adopted))).toBe(true);
      const reconciled = rows.find((r) => r.includes("ReconciliationSucceeded"));
      expect(reconciled).toMatch(
        /^\S+\s+Normal\s+ReconciliationSucceeded\s+kustomization\/held\s+applied revision main@sha1:0123$/,
      );
      expect(ago.accepts(seen(reconciled))).toBe(true);
      // -o wide shows the columns of priority 1: the source (component, else the reporting
      // controller and instance), the first time, the count (1 for a singleton), the name.
      const wide = (await kubectl(...ns, "get", "events", "-o", "wide")).out;
      expect(wide).toMatch(
        /^LAST SEEN\s+TYPE\s+REASON\s+OBJECT\s+SUBOBJECT\s+SOURCE\s+MESSAGE\s+FIRST SEEN\s+COUNT\s+NAME\n/,
      );
      expect(wide).toMatch(
        /\n\S+\s+Normal\s+Adopted\s+kustomization\/held\s+applygate\.dev\/sidecar, sidecar-0\s+held by its claim\s+\S+\s+1\s+held\.suspended\n/,
      );
      expect(wide).toMatch(
        /\n\S+\s+Normal\s+ReconciliationSucceeded\s+kustomization\/held\s+kustomize-controller\s+applied revision main@sha1:0123\s+\S+\s+1\s+held\.reconciled\n/,
      );
      expect((await kubectl(...ns, "get", "events.v1.events.k8s.io")).out.split("\n")[0]).toMatch(
        /^LAST SEEN\s+TYPE\s+REASON\s+OBJECT\s+MESSAGE$/,
      );

      // Each Event through each group, as the group's Go type writes it: the core view of the
      // events.k8s.io one has null first and last times and an empty source, the events.k8s.io view
      // of the core one a null eventTime, and so on. The shared resourceVersion shows one object.
      const read = async (resource: string, name: string) => {
        const o = JSON.parse((await kubectl(...ns, "get", resource, name, "-o", "json")).out);
        const { metadata, ...rest } = o;
        return { rv: metadata.resourceVersion as string, body: rest };
      };
      const reference = {
        apiVersion: "kustomize.toolkit.fluxcd.io/v1",
        kind: "Kustomization",
        namespace: "evented",
        name: "held",
        uid,
      };
      const coreOfV1 = await read("events", "held.suspended");
      expect(coreOfV1.body).toEqual({
        apiVersion: "v1",
        kind: "Event",
        action: "Suspend",
        eventTime: "2025-01-01T00:00:00.000000Z",
        firstTimestamp: null,
        lastTimestamp: null,
        involvedObject: reference,
        message: "held by its claim",
        reason: "Adopted",
        reportingComponent: "applygate.dev/sidecar",
        reportingInstance: "sidecar-0",
        source: {},
        type: "Normal",
      });
      const v1OfV1 = await read("events.v1.events.k8s.io", "held.suspended");
      expect(v1OfV1.body).toEqual({
        apiVersion: "events.k8s.io/v1",
        kind: "Event",
        action: "Suspend",
        eventTime: "2025-01-01T00:00:00.000000Z",
        deprecatedFirstTimestamp: null,
        deprecatedLastTimestamp: null,
        deprecatedSource: {},
        note: "held by its claim",
        reason: "Adopted",
        regarding: reference,
        reportingController: "applygate.dev/sidecar",
        reportingInstance: "sidecar-0",
        type: "Normal",
      });
      expect(v1OfV1.rv).toBe(coreOfV1.rv);
      const coreOfCore = await read("events", "held.reconciled");
      expect(coreOfCore.body).toEqual({
        apiVersion: "v1",
        kind: "Event",
        count: 1,
        eventTime: null,
        firstTimestamp: "2025-01-01T00:00:01Z",
        lastTimestamp: "2025-01-01T00:00:01Z",
        involvedObject: reference,
        message: "applied revision main@sha1:0123",
        reason: "ReconciliationSucceeded",
        reportingComponent: "",
        reportingInstance: "",
        source: { component: "kustomize-controller" },
        type: "Normal",
      });
      const v1OfCore = await read("events.v1.events.k8s.io", "held.reconciled");
      expect(v1OfCore.body).toEqual({
        apiVersion: "events.k8s.io/v1",
        kind: "Event",
        deprecatedCount: 1,
        deprecatedFirstTimestamp: "2025-01-01T00:00:01Z",
        deprecatedLastTimestamp: "2025-01-01T00:00:01Z",
        deprecatedSource: { component: "kustomize-controller" },
        eventTime: null,
        note: "applied revision main@sha1:0123",
        reason: "ReconciliationSucceeded",
        regarding: reference,
        type: "Normal",
      });
      expect(v1OfCore.rv).toBe(coreOfCore.rv);

      // kubectl describe finds a custom resource's Events with involvedObject field selectors.
      const described = await kubectl(...ns, "describe", "ks", "held");
      expect(described.code, described.out).toBe(0);
      expect(described.out).toMatch(/Events:\n\s+Type\s+Reason\s+Age\s+From\s+Message/);
      expect(described.out).toMatch(/Normal\s+Adopted\s+.*applygate.dev\/sidecar\s+held by its claim/);
      expect(described.out).toMatch(
        /Normal\s+ReconciliationSucceeded\s+.*kustomize-controller\s+applied revision/,
      );
      const selected = await kubectl(
        ...ns,
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=held,reason=Adopted",
        "-o",
        "name",
      );
      expect(selected).toEqual({ code: 0, out: "event/held.suspended\n" });
      const byRegarding = await kubectl(
        ...ns,
        "get",
        "events.v1.events.k8s.io",
        "--field-selector",
        "regarding.name=held,reason=ReconciliationSucceeded",
        "-o",
        "name",
      );
      expect(byRegarding).toEqual({ code: 0, out: "event.events.k8s.io/held.reconciled\n" });

      // A change through one group is a change of the other: a watch on core v1 sees a v1 edit.
      const watcher = spawn(b.kubectl, [
        "--kubeconfig",
        kubeconfig,
        ...ns,
        "get",
        "events",
        "--watch-only",
        "-o",
        "name",
      ]);
      let watched = "";
      watcher.stdout.on("data", (d: Buffer) => {
        watched += d.toString();
      });
      try {
        await new Promise((r) => setTimeout(r, 500)); // no condition tells that kubectl's watch is open
        const patched = await kubectl(
          ...ns,
          "patch",
          "events.v1.events.k8s.io",
          "held.suspended",
          "--type",
          "merge",
          "-p",
          '{"series":{"count":2,"lastObservedTime":"2025-01-01T00:01:00.000000Z"}}',
        );
        expect(patched.code, patched.out).toBe(0);
        await until(
          () => watched.includes("event/held.suspended"),
          "kubectl's core v1 watch to see the edit",
        );
      } finally {
        watcher.kill();
      }
      const series = JSON.parse(
        (await kubectl(...ns, "get", "events", "held.suspended", "-o", "json")).out,
      ).series;
      expect(series).toEqual({ count: 2, lastObservedTime: "2025-01-01T00:01:00.000000Z" });
      // A series is printed with its count and its last observation.
      expect((await kubectl(...ns, "get", "events", "-o", "wide")).out).toMatch(
        /\n\S+\s+Normal\s+Adopted\s+kustomization\/held\s+.*held by its claim\s+\S+\s+2\s+held\.suspended\n/,
      );
      expect((await kubectl(...ns, "delete", "events", "held.suspended")).code).toBe(0);
      expect((await kubectl(...ns, "get", "events.v1.events.k8s.io", "held.suspended")).out).toContain(
        "NotFound",
      );
    });

    it("carries the identity in its kubeconfig: a restricted user is refused with 403", async () => {
      const viewer = await b.addUser(
        "viewer",
        [{ verbs: ["get", "list", "watch"], apiGroups: ["*"], resources: ["*"] }],
        dir,
      );
      const list = await run(b.kubectl, ["--kubeconfig", viewer.kubeconfigPath, "get", "configmaps"]).then(
        () => 0,
        (e) => e.code,
      );
      expect(list).toBe(0);
      await writeFile(
        join(dir, "cm.json"),
        JSON.stringify({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "x" } }),
      );
      const create = await run(b.kubectl, [
        "--kubeconfig",
        viewer.kubeconfigPath,
        "create",
        "-f",
        join(dir, "cm.json"),
      ]).catch((e) => e);
      expect(create.stderr).toContain(`User "${viewer.user}" cannot create resource "configmaps"`);
    });
  });
}
