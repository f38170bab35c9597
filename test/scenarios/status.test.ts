/**
 * `applygate status` against the playground's cluster, run as a namespace viewer (a
 * ServiceAccount bound to the built-in `view` role in the demo namespace, on an API server that
 * enforces RBAC): for a claim held by an approval, a change window, the barrier and a running
 * operation, the command names the right reason each time, as the decision core explains it. The
 * same command as a kubectl plugin (`kubectl applygate status`) through the real kubectl, and
 * `applygate suspend|resume` as an editor.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { run as reconcile } from "../../queue/cli/reconcile.js";
import { run as status } from "../../queue/cli/status.js";
import type { StatusReport, TargetStatus } from "../../queue/cli/status-model.js";
import { setSuspend } from "../../queue/cli/suspend-resume.js";
import { foreignPush, readClaim, until } from "../playground/actors.js";
import { DEMO_NAMESPACE } from "../playground/demo.js";
import { operationsOf, type Scene, startScene } from "./harness.js";

const MERGE = k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch);
const G = { group: "applygate.dev", version: "v1alpha1", namespace: DEMO_NAMESPACE };
const BIN = fileURLToPath(new URL("../../queue/cli/applygate.mjs", import.meta.url));

describe("applygate status, as a namespace viewer", () => {
  let s: Scene;
  let viewerKubeconfig: string;
  let editorKubeconfig: string;
  let custom: k8s.CustomObjectsApi;
  const dir = mkdtempSync(join(tmpdir(), "applygate-status-"));

  beforeAll(async () => {
    s = await startScene();
    custom = s.a.kubeConfig.makeApiClient(k8s.CustomObjectsApi);
    const viewer = s.a.api.addServiceAccount(DEMO_NAMESPACE, "status-viewer");
    const editor = s.a.api.addServiceAccount(DEMO_NAMESPACE, "status-editor");
    await s.a.api.applyYaml(`
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: status-viewer, namespace: ${DEMO_NAMESPACE}}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects: [{kind: ServiceAccount, name: status-viewer, namespace: ${DEMO_NAMESPACE}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: status-editor, namespace: ${DEMO_NAMESPACE}}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}
subjects: [{kind: ServiceAccount, name: status-editor, namespace: ${DEMO_NAMESPACE}}]
`);
    viewerKubeconfig = join(dir, "viewer.kubeconfig");
    editorKubeconfig = join(dir, "editor.kubeconfig");
    await s.a.api.writeKubeconfig(viewerKubeconfig, viewer);
    await s.a.api.writeKubeconfig(editorKubeconfig, editor);
  });
  afterAll(async () => s?.stop());

  const env = () => ({ REDIS_URL: s.a.redis.url, APPLYGATE_REDIS_PREFIX: s.a.prefix });

  /** Runs the command in this process as the viewer; answers its exit code and output. */
  async function runStatus(args: string[], kubeconfig = viewerKubeconfig, withRedis = true) {
    let out = "";
    let err = "";
    const code = await status([...args, "--kubeconfig", kubeconfig, "-n", DEMO_NAMESPACE], {
      stdout: (t) => {
        out += t;
      },
      stderr: (t) => {
        err += t;
      },
      env: withRedis ? env() : {},
    });
    return { code, out, err };
  }

  async function report(): Promise<StatusReport> {
    const r = await runStatus(["-o", "json"]);
    expect(r.err).toBe("");
    expect(r.code).toBe(0);
    return JSON.parse(r.out) as StatusReport;
  }
  const row = (rep: StatusReport, name: string) => rep.targets.find((t) => t.name === name) as TargetStatus;

  /** Waits until the viewer's status of GitTarget `name` satisfies `ok`; answers it. */
  async function statusUntil(name: string, ok: (t: TargetStatus) => boolean, what: string) {
    let last: TargetStatus | undefined;
    await until(
      async () => {
        last = row(await report(), name);
        return last !== undefined && ok(last);
      },
      `${what} (last: ${JSON.stringify(last?.waiting ?? last?.why)})`,
    );
    return last as TargetStatus;
  }

  it("lists every GitTarget of the namespace with its branch, folder, claim and nothing pending once settled", async () => {
    // The scene starts once the claims record their applies; a sidecar writes the end on the claim
    // before it reports it, and the worker's decisions follow the report (CI, 2026-12-05: the
    // webhook applier's Succeeded was still on its way when this read them).
    const rep = await until(async () => {
      const r = await report();
      return r.targets.every((t) => t.state === "idle") && r;
    }, "every GitTarget idle");
    expect(rep.targets.map((t) => t.name)).toEqual(["argo-app", "flux-app", "webhook-app"]);
    for (const t of rep.targets) {
      expect(t).toMatchObject({ branch: "main", decisions: "read", state: "idle", why: "nothing to apply" });
      expect(t.pendingWrites).toEqual({ decided: 0, inCommitWindow: 0 });
      expect(t.operations[0]).toMatchObject({ phase: "Succeeded", commit: s.start });
    }
    expect(row(rep, "flux-app")).toMatchObject({
      path: "apps/flux",
      claim: { kind: "FluxClaim", name: "flux-app" },
    });
    const table = await runStatus([]);
    expect(table.out.split("\n")[0]).toMatch(
      /^NAME\s+BRANCH\s+PATH\s+CLAIM\s+WRITES\s+PENDING\s+STATE\s+WHY$/,
    );
    expect(table.out).toMatch(
      /flux-app\s+main\s+apps\/flux\s+FluxClaim\/flux-app\s+0\s+-\s+idle\s+nothing to apply/,
    );
  });

  it("a claim held by an approval: awaiting approval, naming the foreign commit and the source it lacks", async () => {
    await custom.patchNamespacedCustomObject(
      { ...G, plural: "argocdclaims", name: "argo-app", body: { spec: { approval: { manual: true } } } },
      MERGE,
    );
    const pushed = await foreignPush(s.a, "argocd", "needs-approval");
    const t = await statusUntil(
      "argo-app",
      (x) => x.waiting?.hold === "awaiting approval",
      "awaiting approval",
    );
    expect(t.state).toBe("held");
    expect(t.pending).toEqual(["ForeignCommit"]);
    expect(t.reason).toBe("ForeignCommit");
    expect(t.why).toBe(`awaiting approval: ${pushed.slice(0, 12)} lacks Manual`);
    const detail = await runStatus(["argo-app"]);
    expect(detail.out).toMatch(/Why not now:\s+awaiting approval: /);
    expect(detail.out).toContain("ApplyAllowed");
  });

  it("a claim held by a change window: outside it, with the next opening", async () => {
    // A deny window opening every minute for an hour: closed now and for the next hour.
    await custom.patchNamespacedCustomObject(
      {
        ...G,
        plural: "gittargets",
        name: "webhook-app",
        body: { spec: { changeWindows: [{ kind: "deny", schedule: "* * * * *", duration: "1h" }] } },
      },
      MERGE,
    );
    await until(
      async () =>
        (
          ((await readClaim(s.a, "webhook"))?.status?.conditions ?? []) as { type: string; reason: string }[]
        ).some((c) => c.type === "ApplyAllowed" && c.reason === "OutsideChangeWindow"),
      "the webhook claim to show OutsideChangeWindow",
    );
    await foreignPush(s.a, "webhook", "outside-window");
    const t = await statusUntil(
      "webhook-app",
      (x) => x.waiting?.hold === "outside change window" && x.pending?.includes("ForeignCommit") === true,
      "held by the change window",
    );
    expect(t.state).toBe("held");
    expect(t.why).toMatch(/^inside a deny change window: next opening /);
  });

  it("a claim held by the barrier: a GitTarget naming it whose folder is not in the tip", async () => {
    await s.a.api.applyYaml(`
apiVersion: applygate.dev/v1alpha1
kind: GitTarget
metadata: {name: status-barrier, namespace: ${DEMO_NAMESPACE}}
spec:
  providerRef: {name: demo}
  branch: main
  path: apps/not-yet
  claimRef: {kind: FluxClaim, name: flux-app}
`);
    await statusUntil(
      "status-barrier",
      (x) => x.decisions === "read",
      "the worker to list the new GitTarget",
    );
    await foreignPush(s.a, "flux", "behind-the-barrier");
    const t = await statusUntil("flux-app", (x) => x.waiting?.hold === "barrier", "held by the barrier");
    expect(t.state).toBe("held");
    expect(t.pending).toContain("ForeignCommit");
    expect(t.why).toBe("barrier: GitTarget demo/status-barrier: its folder is not in the tip");
    expect(row(await report(), "status-barrier").barrier).toMatchObject({
      folder: true,
      name: "status-barrier",
    });
    await custom.deleteNamespacedCustomObject({ ...G, plural: "gittargets", name: "status-barrier" });
    await statusUntil(
      "flux-app",
      (x) => x.state === "idle",
      "the flux claim to apply once the barrier is gone",
    );
  });

  it("a claim with a running operation: applying, naming the operation, its phase and commit", async () => {
    s.a.flux.knobs.buildMs = 8_000;
    try {
      const pushed = await foreignPush(s.a, "flux", "running");
      const t = await statusUntil("flux-app", (x) => x.state === "applying", "an operation out");
      expect(t.waiting).toMatchObject({ hold: "operation out", operation: { commit: pushed } });
      const token = (t.waiting as { operation: { token: string } }).operation.token;
      expect(t.why).toMatch(
        new RegExp(`^operation ${token} (Sent|Requested|Running|Settling) for ${pushed.slice(0, 12)}`),
      );
      // What the claim records: the operation, with its reason, is the first of the last operations.
      const current = await statusUntil(
        "flux-app",
        (x) => x.operations[0]?.token === token,
        "the operation on the claim",
      );
      expect(current.operations[0]).toMatchObject({
        commit: pushed,
        reasons: ["ForeignCommit"],
        current: true,
      });
    } finally {
      s.a.flux.knobs.buildMs = 0;
    }
    await until(
      async () => operationsOf(s, "flux").some((o) => o.phases.includes("Succeeded")),
      "the operation to end",
    );
  });

  it("without Redis it says so, and still shows what the claims record", async () => {
    const r = await runStatus(["-o", "json"], viewerKubeconfig, false);
    expect(r.code).toBe(0);
    const rep = JSON.parse(r.out) as StatusReport;
    expect(row(rep, "argo-app").decisions).toMatch(/^not read: no Redis URL given/);
    expect(row(rep, "argo-app").why).toMatch(/^AwaitingApproval: .* \(claim status\)$/);
  });

  it("another namespace is refused to the viewer, in one line", async () => {
    const r = await status(["--kubeconfig", viewerKubeconfig, "-n", "argocd"], {
      stdout: () => {},
      stderr: (t) => {
        expect(t).toMatch(/^applygate status: list gittargets\.applygate\.dev: 403/);
      },
      env: env(),
    });
    expect(r).toBe(1);
  });

  it("suspend and resume: the viewer may not; an editor suspends, status says so, resume lets the apply go", async () => {
    const io = { stdout: () => {}, stderr: () => {}, env: {} };
    // A watch (as the viewer) prints the table once, then the flux-app row again when it changes.
    const stop = new AbortController();
    let watched = "";
    const watching = status(
      ["-w", "--interval", "0.2", "--kubeconfig", viewerKubeconfig, "-n", DEMO_NAMESPACE],
      {
        stdout: (t) => {
          watched += t;
        },
        stderr: () => {},
        env: env(),
        signal: stop.signal,
      },
    );
    await until(async () => watched.startsWith("NAME"), "the watch's first table");
    const first = watched;
    expect(
      await setSuspend(["flux-app", "--kubeconfig", viewerKubeconfig, "-n", DEMO_NAMESPACE], true, io),
    ).toBe(1);
    expect(
      await setSuspend(["flux-app", "--kubeconfig", editorKubeconfig, "-n", DEMO_NAMESPACE], true, io),
    ).toBe(0);
    const before = operationsOf(s, "flux").length;
    await foreignPush(s.a, "flux", "while-suspended");
    const t = await statusUntil("flux-app", (x) => x.waiting?.hold === "suspended", "held by the suspension");
    expect(t.suspended).toBe(true);
    expect(t.why).toBe("suspended: GitTarget demo/flux-app has spec.suspend (applygate resume)");
    await until(async () => watched.includes("has spec.suspend"), "the watch to print the held row");
    stop.abort();
    expect(await watching).toBe(0);
    // Only changed rows follow the first table, under its header, never the header again.
    const after = watched.slice(first.length).split("\n").filter(Boolean);
    expect(after.some((l) => /^flux-app\s+main\s+apps\/flux\s.*\sheld\s+suspended: /.test(l))).toBe(true);
    expect(after.some((l) => l.startsWith("NAME"))).toBe(false);
    expect(after.every((l) => /^(flux-app|argo-app|webhook-app)\s/.test(l))).toBe(true);
    expect(operationsOf(s, "flux")).toHaveLength(before);
    expect(
      await setSuspend(["flux-app", "--kubeconfig", editorKubeconfig, "-n", DEMO_NAMESPACE], false, io),
    ).toBe(0);
    await until(
      async () =>
        operationsOf(s, "flux")
          .slice(before)
          .some((o) => o.phases.includes("Succeeded")),
      "the apply once resumed",
    );
  });

  it("reconcile asks for an apply now through the same rules: one apply of the applied tip; under a change window it waits", async () => {
    const io = () => {
      let out = "";
      return {
        get out() {
          return out;
        },
        stdout: (t: string) => {
          out += t;
        },
        stderr: (t: string) => {
          out += t;
        },
        env: {},
      };
    };
    const before = operationsOf(s, "flux").length;
    const flux = io();
    const args = (claim: string) => [claim, "--kubeconfig", editorKubeconfig, "-n", DEMO_NAMESPACE];
    expect(await reconcile(args("fluxclaim/flux-app"), flux), flux.out).toBe(0);
    expect(flux.out).toMatch(/the branch worker took the request/);
    await until(
      async () =>
        operationsOf(s, "flux")
          .slice(before)
          .some((o) => o.phases.includes("Succeeded")),
      "the requested apply",
    );
    const [op] = operationsOf(s, "flux").slice(before);
    expect(op?.attempt.targets.map((t) => t.reason)).toEqual(["CatchUp"]);
    // The viewer may not ask for one.
    const viewer = io();
    expect(
      await reconcile(["flux-app", "--kubeconfig", viewerKubeconfig, "-n", DEMO_NAMESPACE], viewer),
    ).toBe(1);
    expect(viewer.out).toMatch(/403/);
    // webhook-app's GitTarget is inside a deny window (the change-window test): taken, and held.
    const webhookBefore = s.progress.attempts().filter((a) => a.applier.kind === "webhook").length;
    const held = io();
    expect(await reconcile(args("webhook-app"), held), held.out).toBe(0);
    const t = await statusUntil(
      "webhook-app",
      (x) => x.pending?.includes("Requested") === true,
      "the request pending",
    );
    expect(t.waiting?.hold).toBe("outside change window");
    expect(s.progress.attempts().filter((a) => a.applier.kind === "webhook")).toHaveLength(webhookBefore);
  });

  it("kubectl applygate status: the same command as a kubectl plugin, found on PATH", async () => {
    const bin = mkdtempSync(join(tmpdir(), "applygate-plugin-"));
    symlinkSync(BIN, join(bin, "kubectl-applygate"));
    const out = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn("kubectl", ["applygate", "status", "-n", DEMO_NAMESPACE, "-o", "wide"], {
        env: {
          ...process.env,
          ...env(),
          PATH: `${bin}:${process.env.PATH ?? ""}`,
          KUBECONFIG: viewerKubeconfig,
        },
      });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (d) => {
        stdout += d;
      });
      child.stderr.on("data", (d) => {
        stderr += d;
      });
      child.on("close", (code) => resolve({ code, stdout, stderr }));
    });
    expect(out.stderr).toBe("");
    expect(out.code).toBe(0);
    expect(out.stdout.split("\n")[0]).toMatch(
      /^NAME\s+BRANCH\s+PATH\s+CLAIM\s+WRITES\s+PENDING\s+STATE\s+LAST OPERATION\s+QUEUE\s+WHY$/,
    );
    expect(out.stdout).toMatch(
      /argo-app\s+main\s+apps\/argocd\s+ArgoCDClaim\/argo-app\s+\d+\s+ForeignCommit\s+held\s/,
    );
  });
});
