/**
 * kubectl facts: what the real `kubectl` does against an API server — server-side apply and its
 * conflicts, printer columns, wait and watch, the generators' protobuf, every everyday verb, one
 * Event under both groups, and a restricted identity's 403.
 *
 * Written once and run against two backends: the simulated API server with the kubectl on PATH
 * (kubectl.test.ts, the default suite) and a real kube-apiserver with etcd and the kubectl the real
 * tier builds (test/real/kubectl.real.test.ts). Where the two differ, the simulator is wrong
 * (test/real/RESULTS.md lists what was found).
 */
import { execFile, spawn } from "node:child_process";
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
      expect((await kubectl(...ns, "scale", "deploy/web", "--replicas=3")).out).toBe(
        "deployment.apps/web scaled\n",
      );
      const deploy = JSON.parse(
        (await kubectl(...ns, "get", "deploy", "web", "-o", "json", "--show-managed-fields")).out,
      );
      expect(deploy.spec.replicas).toBe(3);
      expect(deploy.metadata.generation).toBe(2);
      const scaler = deploy.metadata.managedFields.find(
        (e: { subresource?: string }) => e.subresource === "scale",
      );
      expect(scaler).toMatchObject({ manager: "kubectl", operation: "Update", apiVersion: "apps/v1" });
      expect(scaler.fieldsV1).toEqual({ "f:spec": { "f:replicas": {} } });
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
      expect((await kubectl("explain", "configmap")).out).toContain("KIND:       ConfigMap");

      expect((await kubectl(...ns, "delete", "cm", "app")).out).toBe(deletedLine('configmap "app"', "verbs"));
      expect((await kubectl(...ns, "delete", "-f", join(dir, "deploy.yaml"))).out).toBe(
        deletedLine('deployment.apps "web"', "verbs"),
      );
      expect(await kubectl(...ns, "get", "cm,deploy", "-o", "name")).toEqual({ code: 0, out: "" });
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

      // kubectl get events reads core v1: both are there, the newer one's note as its message.
      const core = await kubectl(...ns, "get", "events");
      expect(core.code, core.out).toBe(0);
      expect(core.out).toMatch(/Adopted\s+.*held by its claim/);
      expect(core.out).toMatch(/ReconciliationSucceeded\s+.*applied revision main@sha1:0123/);
      const held = JSON.parse((await kubectl(...ns, "get", "events", "held.suspended", "-o", "json")).out);
      expect(held).toMatchObject({
        apiVersion: "v1",
        message: "held by its claim",
        action: "Suspend",
        reportingComponent: "applygate.dev/sidecar",
        involvedObject: { kind: "Kustomization", name: "held", uid },
      });
      // ...and events.k8s.io/v1 shows the core one in its own shape, at the same resourceVersion.
      const v1 = JSON.parse(
        (await kubectl(...ns, "get", "events.v1.events.k8s.io", "held.reconciled", "-o", "json")).out,
      );
      expect(v1).toMatchObject({
        apiVersion: "events.k8s.io/v1",
        note: "applied revision main@sha1:0123",
        regarding: { kind: "Kustomization", name: "held" },
        deprecatedSource: { component: "kustomize-controller" },
        deprecatedCount: 1,
      });
      expect(v1.message).toBeUndefined();
      const coreRv = (
        await kubectl(...ns, "get", "events", "held.reconciled", "-o", "jsonpath={.metadata.resourceVersion}")
      ).out;
      expect(v1.metadata.resourceVersion).toBe(coreRv);

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
