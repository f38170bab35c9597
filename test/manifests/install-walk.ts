/**
 * docs/install.md walked: every `kubectl` command in its `sh` blocks runs, in order, with the
 * machine's kubectl against an API server, unless it is listed below with the reason it cannot run
 * there. A command added to the doc must either run or be listed here. One set of test bodies over
 * a backend: the simulated API server (install-walk.test.ts) and the real kube-apiserver
 * (test/real/install-walk.real.test.ts).
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { untilWith } from "../support/wait.js";
import { KUBECTL_AVAILABLE, REPO_ROOT } from "./kustomize.js";

const run = promisify(execFile);
const until = untilWith({ timeoutMs: 120_000, everyMs: 250, retryErrors: true });

/** An API server the walk runs against: a kubeconfig for kubectl, and how to stop it. */
export interface WalkBackend {
  name: string;
  start(): Promise<{ kubeconfig: string; stop(): Promise<void> }>;
}

/** Commands neither cluster here can answer (no pods run, no Flux or Argo CD install), and why. */
const notHere: [RegExp, string][] = [
  [/rollout status/, "no pods run: nothing ever rolls out"],
  [/apply --server-side -k \.$/, "builds Flux's or Argo CD's own install, which is not in this repository"],
  [
    /get (deploy kustomize-controller|sts argocd-application-controller)/,
    "objects of the Flux/Argo CD install",
  ],
  [/-k manifests\/examples\/external-redis/, "the alternative to manifests/base (walked in its place)"],
  [
    /wait --for=condition=Ready gitprovider|get gitprovider .*webhookPath/,
    "the gateway writes that status; no gateway runs in the walk",
  ],
  [/apply -k manifests\/monitoring/, "needs the Prometheus Operator's CRDs"],
];

/**
 * The `sh` blocks of the doc outside its Helm sections (a heading naming Helm, and what is under
 * it): the kustomize path, walked here. The chart is installed on a real API server in
 * test/real/helm.real.test.ts.
 */
function kustomizeBlocks(text: string): string[] {
  const headings: string[] = [];
  const blocks: string[] = [];
  let fence: { sh: boolean; lines: string[] } | undefined;
  for (const line of text.split("\n")) {
    if (fence) {
      if (line.trim() === "```") {
        if (fence.sh && !headings.some((h) => /\bHelm\b/.test(h ?? "")))
          blocks.push(`${fence.lines.join("\n")}\n`);
        fence = undefined;
      } else fence.lines.push(line);
      continue;
    }
    const opening = /^\s*```(\w*)/.exec(line);
    if (opening) {
      fence = { sh: opening[1] === "sh", lines: [] };
      continue;
    }
    const heading = /^(#{1,6}) (.*)/.exec(line);
    if (heading) {
      headings.length = heading[1]!.length - 1;
      headings.push(heading[2]!);
    }
  }
  return blocks;
}

/** The `kubectl` lines of the doc's kustomize `sh` blocks, continuation lines joined. */
async function commands(): Promise<string[]> {
  const text = await readFile(join(REPO_ROOT, "docs/install.md"), "utf8");
  const blocks = kustomizeBlocks(text);
  return blocks
    .flatMap((b) => b.replace(/\\\n\s*/g, " ").split("\n"))
    .map((l) => l.replace(/\s+#.*$/, "").trim())
    .filter((l) => l.startsWith("kubectl "));
}

export function describeInstallWalk(backend: WalkBackend): void {
  describe.skipIf(!KUBECTL_AVAILABLE)(`docs/install.md against ${backend.name}`, () => {
    let stop: (() => Promise<void>) | undefined;
    let dir: string;
    let env: NodeJS.ProcessEnv;
    const sh = async (command: string) => {
      try {
        const { stdout } = await run("sh", ["-c", command], { cwd: REPO_ROOT, env });
        return { code: 0, out: stdout };
      } catch (e) {
        const err = e as { code?: number; stdout?: string; stderr?: string };
        return { code: err.code ?? 1, out: `${err.stdout ?? ""}${err.stderr ?? ""}` };
      }
    };

    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), "install-walk-"));
      const started = await backend.start();
      stop = started.stop;
      const kubeconfig = started.kubeconfig;
      const pass = "0123456789abcdef";
      env = {
        ...process.env,
        KUBECONFIG: kubeconfig,
        PASS: pass,
        URL: `redis://:${pass}@applygate-redis.applygate-system.svc:6379`,
      };
      // What the doc assumes is installed already: Flux's and Argo CD's namespaces.
      for (const ns of ["flux-system", "argocd"])
        expect((await sh(`kubectl create namespace ${ns}`)).code).toBe(0);
    });
    afterAll(async () => {
      await stop?.();
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    it("runs every command it can, in the doc's order, and each succeeds", async () => {
      const all = await commands();
      expect(all.length).toBeGreaterThan(10);
      const ran: string[] = [];
      for (const command of all) {
        if (notHere.some(([re]) => re.test(command))) continue;
        const r = await sh(command);
        expect({ command, ...r }).toMatchObject({ command, code: 0 });
        ran.push(command);
      }
      expect(ran).toContain("kubectl apply --server-side -k manifests/base");
      expect(ran).toContain("kubectl apply -k manifests/examples/resources");
      expect(ran).toContain("kubectl delete fluxclaims,argocdclaims,webhookclaims --all -A --wait=true");

      const crds = await sh("kubectl get crd -l app.kubernetes.io/part-of=applygate -o name");
      expect(crds.out.trim().split("\n").length).toBeGreaterThanOrEqual(4);
      const team = await sh("kubectl get applygate -n team-a -o name");
      expect(team.out).toMatch(/gitprovider/);
      expect(team.out).toMatch(/gittarget/);
      const binding = JSON.parse(
        (await sh("kubectl -n team-a get rolebinding applygate-secret-reader -o json")).out,
      );
      expect(binding.subjects.map((s: { name: string }) => s.name)).toEqual(["applygate-gateway"]);
      const watcher = JSON.parse(
        (await sh("kubectl -n team-a get rolebinding applygate-secret-watcher -o json")).out,
      );
      expect(watcher.subjects.map((s: { name: string }) => s.name)).toEqual(["applygate-worker"]);
      const secret = JSON.parse(
        (await sh("kubectl -n applygate-system get secret applygate-redis -o json")).out,
      );
      expect(Buffer.from(secret.data.url, "base64").toString()).toBe(env.URL);
    });

    it("walks the kustomize path only: the Helm sections' commands are not run here", async () => {
      const all = await commands();
      expect(all).toContain("kubectl create namespace applygate-system");
      expect(all.filter((c) => c === "kubectl create namespace applygate-system")).toHaveLength(1);
      expect(all.some((c) => c.includes("pod-security.kubernetes.io/enforce=restricted"))).toBe(false);
      expect(all.some((c) => c.startsWith("kubectl delete crd"))).toBe(false);
    });

    it("lists every command it does not run with a reason that still matches the doc", async () => {
      const all = await commands();
      for (const [re] of notHere)
        expect(
          all.some((c) => re.test(c)),
          String(re),
        ).toBe(true);
    });

    it("uninstalls as the doc says: claims first, then the control plane", async () => {
      // The walk above ran the doc's uninstall lines for the claims, in the doc's order.
      expect((await sh("kubectl get fluxclaims,argocdclaims -A -o name")).out.trim()).toBe("");
      // The namespace goes first in kubectl's order; its controller may empty it before kubectl
      // reaches the namespaced objects, which are then already gone.
      const r = await sh("kubectl delete -k manifests/base");
      const errors = r.out.split("\n").filter((l) => l.startsWith("Error"));
      expect(
        errors.every((l) => l.includes("(NotFound)")),
        r.out,
      ).toBe(true);
      // A real namespace is Terminating until its controller has emptied it; CRDs until their
      // objects are removed.
      await until(
        async () => (await sh("kubectl get namespace applygate-system")).code !== 0,
        "applygate-system to be gone",
      );
      await until(
        async () => (await sh("kubectl get crd -l app.kubernetes.io/part-of=applygate -o name")).out === "",
        "the CRDs to be gone",
      );
    });
  });
}
