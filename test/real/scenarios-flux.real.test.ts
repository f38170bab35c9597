// applygate beside real Flux (test/real/flux.ts) on the real control plane, every component as
// deployed (test/real/deployed.ts): a Git push applied exactly once with the right revision on the
// Kustomization's status, the two-edit race with and without applygate, commits counted, a sidecar
// killed mid-apply, a worker restart, and a release approved by a signed tag. After each test the
// audit check: no 403 and no 422 for any product component.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { gitOk } from "../git/cli.js";
import { type SshSigner, sshKey } from "../support/signing.js";
import { untilWith } from "../support/wait.js";
import { startSidecar } from "./applygate.js";
import { CONTROL_PLANE, FLUX_BINARIES, findRealBinaries } from "./binaries.js";
import { FLUX_NAMESPACE, GIT_REPOSITORIES, KUSTOMIZATIONS } from "./flux.js";
import { readFluxLog } from "./flux-log.js";
import { applierScenes, type Scene } from "./scenes.js";
import { heldYaml } from "./tenant.js";

const bins = findRealBinaries([...CONTROL_PLANE, ...FLUX_BINARIES]);
if (!bins.built) console.warn(`\n!!! SKIPPED test/real/scenarios-flux.real.test.ts: ${bins.message}\n`);

const run = promisify(execFile);
const until = untilWith({ timeoutMs: 90_000, everyMs: 100, retryErrors: true });

type Obj = {
  metadata: { name: string; annotations?: Record<string, string> };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown> & { conditions?: { type: string; status: string; reason: string }[] };
};

describe.skipIf(!bins.built)("applygate beside real Flux", () => {
  /**
   * The namespace's repository applied by a Kustomization in flux-system on Flux's own timers
   * (Kustomization every second, GitRepository every 20 s) and, `held`, a FluxClaim holding it
   * (with flux-system's ApplierGrant).
   */
  const scene = applierScenes(
    "flux",
    ({ ns, repoUrl, folder, held }) => `apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: ${ns}, namespace: ${FLUX_NAMESPACE}}
spec: {interval: 20s, url: "${repoUrl}", ref: {branch: main}}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: ${ns}, namespace: ${FLUX_NAMESPACE}}
spec:
  interval: 1s
  prune: true
  path: ./${folder}
  sourceRef: {kind: GitRepository, name: ${ns}}
${held ? `---\n${heldYaml(ns, FLUX_NAMESPACE, "FluxClaim")}` : ""}`,
  );
  const { d } = scene;
  const { running } = d;

  const { greeting, commitsSince, edit, record, foreignPush, attemptsSent } = scene;

  const claim = async (s: Scene) => (await scene.claim(s)) as Obj;

  /** A scene (scenes.ts); `held`, once the claim holds the Kustomization. */
  async function open(held: boolean): Promise<Scene> {
    const s = await scene.open(held);
    if (held)
      await until(
        async () =>
          (await claim(s)).status?.conditions?.find((x) => x.type === "InControl")?.status === "True",
        "the claim to hold the Kustomization",
      );
    return s;
  }

  const ks = async (s: Scene) => (await scene.read(s, KUSTOMIZATIONS)) as Obj;
  const artifactRevision = async (s: Scene) =>
    (((await scene.read(s, GIT_REPOSITORIES)) as Obj).status?.artifact as { revision?: string } | undefined)
      ?.revision;
  /** Asks source-controller to fetch now, as `flux reconcile source git` does. */
  const fetchNow = (s: Scene) =>
    scene.annotate(s, GIT_REPOSITORIES, { "reconcile.fluxcd.io/requestedAt": new Date().toISOString() });
  /** The claim's ApplyAllowed condition: why an apply may start or waits. */
  const gate = async (s: Scene) =>
    (
      (await claim(s)).status?.conditions as { type: string; reason: string; message: string }[] | undefined
    )?.find((c) => c.type === "ApplyAllowed");
  /** Until the claim lists `commit` as awaiting approval, its signature refused for `reason`. */
  const waitsWith = (s: Scene, commit: string, reason: string, message: RegExp) =>
    until(async () => {
      const governance = (await claim(s)).status?.governance as
        | {
            awaitingApproval?: {
              commit: string;
              missing: string[];
              signature?: { reason: string; message: string };
            }[];
          }
        | undefined;
      return governance?.awaitingApproval?.some(
        (a) =>
          a.commit === commit &&
          a.missing.includes("Signature") &&
          a.signature?.reason === reason &&
          message.test(a.signature.message),
      );
    }, `the claim to wait for approval of ${commit}: ${reason}`);
  const appliedRevisions = (s: Scene) =>
    readFluxLog(d.applier.logPaths).appliedRevisions({ namespace: FLUX_NAMESPACE, name: s.applier });
  /**
   * Flux applies `pushed` (`value` on the cluster, the Kustomization's lastAppliedRevision), the
   * sidecar holds the Kustomization again, and a few of its one-second intervals later that is the
   * one apply since `before` (how many applies kustomize-controller had logged).
   */
  async function appliedOnce(s: Scene, before: number, pushed: string, value: string) {
    await until(async () => (await greeting(s.ns)) === value, `Flux to apply ${value}`);
    await until(
      async () => (await ks(s)).status?.lastAppliedRevision === `main@sha1:${pushed}`,
      "the Kustomization's lastAppliedRevision",
    );
    // The sidecar resumed it for the operation and holds it again once the operation ended.
    await until(async () => (await ks(s)).spec?.suspend === true, "the Kustomization held again");
    // A few of the Kustomization's one-second intervals more: nothing applies it again.
    await new Promise((r) => setTimeout(r, 5_000));
    expect(appliedRevisions(s).slice(before)).toEqual([`main@sha1:${pushed}`]);
  }

  // -------------------------------------------------------------------------------------------

  it("applies a Git push exactly once through the held Kustomization, its revision on Flux's status", async () => {
    const s = await open(true);
    const before = appliedRevisions(s).length;
    const pushed = await foreignPush(s, "pushed");
    await appliedOnce(s, before, pushed, "pushed");
    expect(await commitsSince(s)).toEqual([pushed]);
  });

  it("the two-edit race held by applygate: the later edit wins, one commit per save, no apply", async () => {
    const s = await open(true);
    const before = appliedRevisions(s).length;
    const rec = record(s);
    const first = await edit(s, "blue");
    // Flux fetches the first commit (the moment the race needs); held, nothing applies it.
    await fetchNow(s);
    await until(
      async () => (await artifactRevision(s))?.endsWith(first),
      "source-controller to fetch the first commit",
    );
    const second = await edit(s, "green");
    await fetchNow(s);
    await until(
      async () => (await artifactRevision(s))?.endsWith(second),
      "source-controller to fetch the second commit",
    );
    // As long again as the Kustomization's interval would have reverted it several times over.
    await new Promise((r) => setTimeout(r, 6_000));
    await rec.stop();
    expect(rec.revertedBy(), JSON.stringify(rec.seen)).toEqual([]);
    expect(await greeting(s.ns)).toBe("green");
    expect(await commitsSince(s)).toEqual([second, first]);
    expect(appliedRevisions(s).slice(before)).toEqual([]);
  });

  it("the two-edit race on Flux's own timers: the first commit reverts the later edit", async () => {
    const s = await open(false);
    const rec = record(s);
    const first = await edit(s, "blue");
    await fetchNow(s);
    await until(
      async () => appliedRevisions(s).includes(`main@sha1:${first}`),
      "Flux to apply the first commit",
    );
    const second = await edit(s, "green");
    // The source still holds the first commit; the Kustomization's next interval applies it.
    await until(async () => rec.revertedBy().length > 0, "a revert of the later edit", 30_000);
    await fetchNow(s);
    await until(
      async () => appliedRevisions(s).includes(`main@sha1:${second}`),
      "Flux to apply the second commit",
    );
    await until(async () => (await greeting(s.ns)) === "green", "green back on the cluster");
    await rec.stop();
    expect(rec.revertedBy()).toContain("kustomize-controller");
    expect(await commitsSince(s)).toEqual([second, first]);
  });

  it("a Flux sidecar killed while the Kustomization is resumed: the next one follows the operation to Succeeded, once", async () => {
    const s = await open(true);
    const pushed = await foreignPush(s, "while-killed");
    await until(
      async () => (await ks(s)).spec?.suspend === false,
      "the sidecar to resume the Kustomization",
      30_000,
      10,
    );
    // SIGKILL, as an OOM kill ends the container: nothing suspends the Kustomization, which Flux
    // reconciles every second meanwhile (each reconcile shows Ready Unknown while it runs).
    await running.flux!.kill();
    running.flux = await startSidecar(d.installed, "flux");
    const ended = async () =>
      (
        (await claim(s)).status?.history as { commit: string; phase: string; outcome?: string }[] | undefined
      )?.filter((h) => h.commit === pushed) ?? [];
    await until(async () => (await ended()).length > 0, "the operation for the push to end");
    await until(async () => (await ks(s)).spec?.suspend === true, "the Kustomization held again");
    // Long enough for a second attempt to be sent and to end, were one sent.
    await new Promise((r) => setTimeout(r, 5_000));
    expect((await ended()).map((h) => h.phase)).toEqual(["Succeeded"]);
    expect(await greeting(s.ns)).toBe("while-killed");
    expect(appliedRevisions(s).filter((r) => !r.endsWith(pushed) && !r.endsWith(s.start))).toEqual([]);
  });

  it("a worker restart: a push made while no worker runs is applied exactly once by the next", async () => {
    const s = await open(true);
    const before = appliedRevisions(s).length;
    const pushed = await scene.pushWhileNoWorker(s, "while-down");
    await until(async () => (await greeting(s.ns)) === "while-down", "the new worker's apply of the push");
    await until(async () => (await ks(s)).spec?.suspend === true, "the Kustomization held again");
    await new Promise((r) => setTimeout(r, 5_000));
    expect(appliedRevisions(s).slice(before)).toEqual([`main@sha1:${pushed}`]);
  });

  it("a release approved by a signed tag: an untagged commit, a lightweight tag and a tag by an untrusted key apply nothing; the tag of a trusted key applies it exactly once", async () => {
    const s = await open(true);
    // The rule is set once the claim's converge of the tip ended: the last applied commit is the
    // tip, so nothing awaits approval before the push.
    await until(
      async () => (await claim(s)).status?.lastAppliedCommit === s.start,
      "the converge of the tip",
    );
    const ada = sshKey(d.work, "ed25519", "ada@release");
    const eve = sshKey(d.work, "ed25519", "eve@laptop");
    // The keys Secret, read by the worker (applygate-secret-watcher, which the scene binds) and, at
    // the write, by the Flux sidecar as kustomize-controller (docs/governance.md, "RBAC").
    const keys = `--from-literal=authorized_keys=${ada.publicKey}`;
    await d.kubectlOk(["-n", s.ns, "create", "secret", "generic", "release-keys", keys]);
    await d.kubectlOk([
      "-n",
      s.ns,
      "create",
      "rolebinding",
      "applygate-secret-reader-flux",
      "--clusterrole=applygate-secret-reader",
      `--serviceaccount=${FLUX_NAMESPACE}:kustomize-controller`,
    ]);
    const rule = { signature: { secretRef: { name: "release-keys" }, mode: "Tag", tagPattern: "v*" } };
    const patch = JSON.stringify({ spec: { approval: rule } });
    await d.kubectlOk(["-n", s.ns, "patch", "fluxclaim", "web", "--type=merge", "-p", patch]);
    await until(
      async () => (await gate(s))?.reason === "Approved",
      "the claim to find nothing awaiting approval",
    );
    const before = appliedRevisions(s).length;

    const pushed = await foreignPush(s, "released");
    await waitsWith(s, pushed, "CommitNotTagged", /no annotated tag matching "v\*"/);
    // Tags pushed by the real git CLI, as a release manager pushes them (the worker reads the tags
    // again every commit-status poll, 15 s as deployed, while a commit waits).
    const clone = await scene.clone(s);
    const tag = async (args: string[], signer?: SshSigner) => {
      const signing = signer ? ["-c", "gpg.format=ssh", "-c", `user.signingkey=${signer.keyPath}`] : [];
      await gitOk([...signing, "tag", ...args, pushed], { cwd: clone });
      await gitOk(["push", "-q", "origin", args.at(-1)!], { cwd: clone });
    };
    await tag(["v0"]);
    await waitsWith(s, pushed, "CommitUnsigned", /tag v0 is a lightweight tag/);
    await tag(["-s", "-m", "release by eve", "v0.9"], eve);
    await waitsWith(s, pushed, "SignatureUntrusted", /^tag v0\.9: /);
    // Nothing applied it: no attempt sent, the Kustomization still held, the cluster unchanged.
    expect(attemptsSent(pushed)).toEqual([]);
    expect((await ks(s)).spec?.suspend).toBe(true);
    expect(await greeting(s.ns)).toBe("hello");
    expect(appliedRevisions(s).slice(before)).toEqual([]);

    // The release manager tags the release: no new commit, the next read of the tags approves it.
    await tag(["-s", "-m", "release 1.0.0", "v1.0.0"], ada);
    await appliedOnce(s, before, pushed, "released");
    expect(attemptsSent(pushed)).toHaveLength(1);
    const adaKey = (await run("ssh-keygen", ["-l", "-f", `${ada.keyPath}.pub`])).stdout.split(" ")[1];
    const history = (await claim(s)).status?.history as
      | { commit: string; phase: string; approvals?: unknown[] }[]
      | undefined;
    expect(history?.filter((h) => h.commit === pushed)).toEqual([
      expect.objectContaining({
        phase: "Succeeded",
        approvals: [
          expect.objectContaining({
            commit: pushed,
            sources: ["Signature"],
            tag: { name: "v1.0.0", signedBy: adaKey },
          }),
        ],
      }),
    ]);
    expect((await gate(s))?.reason).toBe("Approved");
    expect(await commitsSince(s)).toEqual([pushed]);
  });
});
