import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as k8s from "@kubernetes/client-node";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { ManualClock } from "../../queue/worker/clock.js";
import { gitOk } from "../git/cli.js";
import { startStatusHost } from "../git/status-host.js";
import { gpgKey, hasGpg, type SshSigner, sshKey, stopGpgAgents } from "../support/signing.js";
import {
  annotated,
  approve,
  CLAIM_KEY,
  FOLDER,
  GROUP,
  isAncestor,
  NS,
  secondTarget,
  settled,
  type World,
  world,
} from "./decisions-world.js";
import { foreignCommit } from "./foreign.js";
import { waitFor } from "./harness.js";

describe("decisions shell: governance — change windows, approvals, commit statuses, signatures", () => {
  let w: World;
  afterEach(async () => {
    await w.close();
  });
  afterAll(stopGpgAgents);

  it("change windows: a foreign push outside the claim's window waits with OutsideChangeWindow and the next opening; at the opening the worker wakes and applies once; an override lets one apply through", {
    timeout: 60_000,
  }, async () => {
    const clock = new ManualClock(Date.parse("2026-12-01T13:00:00Z"));
    w = await world({
      appliedInitial: true,
      clock,
      claimSpec: { changeWindows: [{ kind: "allow", schedule: "0 10 * * *", duration: "2h" }] },
    });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    const gate = async () =>
      (
        (await w.claim()).status?.conditions as
          | { type: string; reason: string; message: string }[]
          | undefined
      )?.find((c) => c.type === "ApplyAllowed");
    await waitFor(
      "the claim shows the window closed",
      async () => (await gate())?.reason === "OutsideChangeWindow",
    );
    expect((await w.claim()).status?.governance).toEqual({
      changeWindow: { open: false, nextOpening: "2026-12-02T10:00:00.000Z" },
    });

    await foreignCommit(w.bare, `${FOLDER}/from-git.txt`, "git side\n");
    w.worker().observeSoon();
    await waitFor("the ForeignCommit pending", () =>
      w.driver().state.appliers[CLAIM_KEY]?.pending.all.includes("ForeignCommit"),
    );
    await w.driver().idle();
    expect(w.attempts).toHaveLength(0);

    // A second before the opening, still nothing; at the opening, the wake sends one apply.
    clock.advance(Date.parse("2026-12-02T09:59:59Z") - clock.now());
    await w.driver().idle();
    expect(w.attempts).toHaveLength(0);
    clock.advance(1000);
    await waitFor("the apply at the opening", () => w.attempts.length === 1);
    expect(w.attempts[0]?.targets.map((t) => t.reason)).toEqual(["ForeignCommit"]);
    expect(w.attempts[0]?.override).toBeUndefined();
    await waitFor(
      "the claim shows the window open",
      async () => (await gate())?.reason === "InsideChangeWindow",
    );
    await waitFor("nothing left to decide", () => settled(w));

    // Past the window, a person overrides it for one apply.
    clock.advance(3 * 3_600_000);
    await waitFor("closed again", async () => (await gate())?.reason === "OutsideChangeWindow");
    await foreignCommit(w.bare, `${FOLDER}/from-git-2.txt`, "git side 2\n");
    w.worker().observeSoon();
    await waitFor("the second ForeignCommit pending", () =>
      w.driver().state.appliers[CLAIM_KEY]?.pending.all.includes("ForeignCommit"),
    );
    // An annotation, which whoever may edit the claim can set, overrides nothing.
    await w.custom.patchNamespacedCustomObject(
      {
        ...GROUP,
        plural: "fluxclaims",
        namespace: NS,
        name: "claim",
        body: { metadata: { annotations: { "applygate.dev/change-window-override": "INC-7 hotfix" } } },
      },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
    );
    await annotated(w, "applygate.dev/change-window-override");
    await w.driver().idle();
    expect(w.attempts).toHaveLength(1);
    await approve(w, "inc-7", { changeWindowOverride: "INC-7 hotfix" });
    await waitFor("the overridden apply", () => w.attempts.length === 2);
    expect(w.attempts[1]?.override).toEqual({ changeWindow: "INC-7 hotfix", by: "ada" });
    await waitFor("nothing left to decide", () => settled(w));
    await waitFor("the override recorded as used", async () => {
      const used = (
        (await w.claim()).status?.governance as { overrideUsed?: { value: string; token: string } }
      )?.overrideUsed;
      return used?.value === "INC-7 hotfix" && used.token === w.attempts[1]?.token;
    });
    // Used once: a third push waits for the next opening.
    await foreignCommit(w.bare, `${FOLDER}/from-git-3.txt`, "git side 3\n");
    w.worker().observeSoon();
    await waitFor("the third ForeignCommit pending", () =>
      w.driver().state.appliers[CLAIM_KEY]?.pending.all.includes("ForeignCommit"),
    );
    await w.driver().idle();
    expect(w.attempts).toHaveLength(2);
  });

  it("manual approval: a foreign push waits with AwaitingApproval while API edits still reach Git; once a person approves its SHA, one apply runs, of the tip holding both", {
    timeout: 60_000,
  }, async () => {
    w = await world({ appliedInitial: true, claimSpec: { approval: { manual: true } } });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    const governance = async () =>
      (await w.claim()).status?.governance as
        | { awaitingApproval?: { commit: string; missing: string[] }[] }
        | undefined;
    const reason = async () =>
      ((await w.claim()).status?.conditions as { type: string; reason: string }[] | undefined)?.find(
        (c) => c.type === "ApplyAllowed",
      )?.reason;
    await waitFor("nothing to approve at the start", async () => (await reason()) === "Approved");

    const foreign = await foreignCommit(w.bare, `${FOLDER}/from-git.txt`, "git side\n");
    w.worker().observeSoon();
    await waitFor("the claim waits for approval of the foreign commit", async () =>
      (await governance())?.awaitingApproval?.some(
        (a) => a.commit === foreign && a.missing.includes("Manual"),
      ),
    );
    expect(await reason()).toBe("AwaitingApproval");

    // API edits keep reaching Git meanwhile, and still no apply.
    const edit = await w.accept("a", "1", { save: true });
    const tip = await waitFor("the edit published", () => w.published(edit.id));
    expect(await isAncestor(w, foreign, tip)).toBe(true);
    await waitFor(
      "the read of the new tip",
      () => w.driver().state.appliers[CLAIM_KEY]?.foreignRead?.tip === tip,
    );
    await w.driver().idle();
    expect(w.attempts).toHaveLength(0);
    expect((await governance())?.awaitingApproval?.map((a) => a.commit)).toEqual([foreign]);

    // An annotation on the claim, which whoever may edit it can set, approves nothing.
    await w.custom.patchNamespacedCustomObject(
      {
        ...GROUP,
        plural: "fluxclaims",
        namespace: NS,
        name: "claim",
        body: { metadata: { annotations: { [`approve.applygate.dev/${foreign}`]: "eve: self-approved" } } },
      },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
    );
    await annotated(w, `approve.applygate.dev/${foreign}`);
    await w.driver().idle();
    expect(w.attempts).toHaveLength(0);
    expect(await reason()).toBe("AwaitingApproval");

    await approve(w, "cab-12", { commit: foreign, note: "CAB-12" });
    await waitFor("the approved apply", () => w.attempts.length === 1);
    expect(w.attempts[0]?.commit).toBe(tip);
    expect(w.attempts[0]?.approvals).toEqual([{ commit: foreign, sources: ["Manual"], by: ["ada"] }]);
    await waitFor("the apply succeeded", async () => (await w.claim()).status?.lastAppliedCommit === tip);
    await waitFor("nothing left to decide", () => settled(w));
    await waitFor("approved", async () => (await reason()) === "Approved");
    expect(w.attempts).toHaveLength(1);
  });

  it("one claim's approval setting the worker cannot use (a commit status with no repository, the URL naming none) holds that claim alone, with ApprovalUnreadable; another claim's approvals on the branch still flow", {
    timeout: 60_000,
  }, async () => {
    w = await world({
      appliedInitial: true,
      commitStatusPollMs: 200,
      claimSpec: { approval: { manual: true } },
    });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    await secondTarget(w, "clusters/extra", {
      claimSpec: { approval: { commitStatus: { context: "ci/approved", api: "gitea" } } },
    });
    const CLAIM2 = `FluxClaim/${NS}/claim2`;
    await waitFor("the second claim listed", () => w.driver().state.appliers[CLAIM2] !== undefined);
    const allowed = async (name: string) =>
      (
        (
          (await w.custom.getNamespacedCustomObject({
            ...GROUP,
            plural: "fluxclaims",
            namespace: NS,
            name,
          })) as {
            status?: { conditions?: { type: string; reason: string; message: string }[] };
          }
        ).status?.conditions ?? []
      ).find((c) => c.type === "ApplyAllowed");
    const awaiting = async () =>
      ((await w.claim()).status?.governance as { awaitingApproval?: { commit: string }[] } | undefined)
        ?.awaitingApproval;

    const foreign = await foreignCommit(w.bare, `${FOLDER}/from-git.txt`, "git side\n");
    w.worker().observeSoon();
    // The first claim's approval is read although the second's cannot be.
    await waitFor("the first claim waits for approval of the foreign commit", async () =>
      (await awaiting())?.some((a) => a.commit === foreign),
    );
    expect((await allowed("claim"))?.reason).toBe("AwaitingApproval");
    // The second claim says why it is held, and only it.
    await waitFor(
      "the second claim shows ApprovalUnreadable",
      async () => (await allowed("claim2"))?.reason === "ApprovalUnreadable",
    );
    expect((await allowed("claim2"))?.message).toContain("cannot tell owner and repository");

    await approve(w, "first", { commit: foreign });
    await waitFor("the approved apply of the first claim", () =>
      w.attempts.some((a) => a.claim.name === "claim"),
    );
    await waitFor("it succeeded", async () => (await w.claim()).status?.lastAppliedCommit === foreign);
    // Read again at the polls, still unreadable: the second claim never got an attempt.
    await waitFor("read again", () => {
      const r = w.driver().state.appliers[CLAIM2]?.foreignRead;
      return r?.unreadable !== undefined && r.tip === foreign;
    });
    expect(w.attempts.filter((a) => a.claim.name === "claim2")).toEqual([]);
    expect((await allowed("claim2"))?.reason).toBe("ApprovalUnreadable");
  });

  it("commit-status approval: a foreign push waits with AwaitingApproval (CommitStatus) while API edits reach Git; the context turns success on the host and one apply runs", {
    timeout: 60_000,
  }, async () => {
    const host = await startStatusHost({ api: "gitea", owner: "git", repo: "site", token: "s3cret" });
    try {
      w = await world({
        appliedInitial: true,
        providerToken: "s3cret",
        commitStatusPollMs: 100,
        providerSpec: { commitStatus: { apiURL: host.root, repository: "git/site" } },
        claimSpec: { approval: { commitStatus: { context: "ci/approved", api: "gitea" } } },
      });
      await w.startReplica();
      await waitFor("baseline", () => w.driver().state.observed);
      const awaiting = async () =>
        (
          (await w.claim()).status?.governance as {
            awaitingApproval?: { commit: string; missing: string[] }[];
          }
        )?.awaitingApproval;
      const foreign = await foreignCommit(w.bare, `${FOLDER}/from-git.txt`, "git side\n");
      w.worker().observeSoon();
      await waitFor("the claim waits for the commit status", async () =>
        (await awaiting())?.some((a) => a.commit === foreign && a.missing.includes("CommitStatus")),
      );
      host.setStatus(foreign, "ci/approved", "pending");
      const edit = await w.accept("a", "1", { save: true });
      const tip = await waitFor("the edit published", () => w.published(edit.id));
      await waitFor("read again while pending", () => host.requests.length >= 3);
      expect(w.attempts).toHaveLength(0);

      host.setStatus(foreign, "ci/approved", "success");
      await waitFor("the approved apply", () => w.attempts.length === 1);
      expect(w.attempts[0]?.commit).toBe(tip);
      expect(w.attempts[0]?.approvals).toEqual([{ commit: foreign, sources: ["CommitStatus"] }]);
      await waitFor("nothing left to decide", () => settled(w));
      expect(w.attempts).toHaveLength(1);
      expect(host.badRequests).toEqual([]);
    } finally {
      await host.close();
    }
  });

  it("commit-status reads use the GitProvider's current credentials: added to the running provider they are sent at the next read, removed they are not", {
    timeout: 60_000,
  }, async () => {
    const host = await startStatusHost({ api: "gitea", owner: "git", repo: "site", token: "s3cret" });
    try {
      w = await world({
        appliedInitial: true,
        commitStatusPollMs: 100,
        providerSpec: { commitStatus: { apiURL: host.root, repository: "git/site" } },
        claimSpec: { approval: { commitStatus: { context: "ci/approved", api: "gitea" } } },
      });
      await w.startReplica();
      await waitFor("baseline", () => w.driver().state.observed);
      const foreign = await foreignCommit(w.bare, `${FOLDER}/from-git.txt`, "git side\n");
      host.setStatus(foreign, "ci/approved", "success");
      w.worker().observeSoon();
      // No credentials yet: the host refuses the reads, and nothing is applied.
      await waitFor("reads refused without credentials", () =>
        host.badRequests.some((b) => b === "authorization undefined"),
      );
      expect(w.attempts).toHaveLength(0);

      // Credentials added to the running GitProvider: the next read carries them.
      const core = w.api.kubeConfig().makeApiClient(k8s.CoreV1Api);
      await core.createNamespacedSecret({
        namespace: NS,
        body: { metadata: { name: "creds" }, stringData: { token: "s3cret" } },
      });
      await w.custom.patchNamespacedCustomObject(
        {
          ...GROUP,
          plural: "gitproviders",
          namespace: NS,
          name: "gp",
          body: { spec: { credentialsSecretRef: { name: "creds" } } },
        },
        k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
      );
      await waitFor("the approved apply", () => w.attempts.length === 1);
      expect(w.attempts[0]?.approvals).toEqual([{ commit: foreign, sources: ["CommitStatus"] }]);

      // Removed: later reads go out without them (and are refused).
      await core.deleteNamespacedSecret({ namespace: NS, name: "creds" });
      await waitFor("the worker sees them gone", async () => {
        const t = (await w.custom.getNamespacedCustomObject({
          ...GROUP,
          plural: "gittargets",
          namespace: NS,
          name: "site",
        })) as { status?: { conditions?: { type: string; reason: string }[] } };
        return t.status?.conditions?.some(
          (c) => c.type === "CredentialsAvailable" && c.reason === "SecretNotFound",
        );
      });
      const refusedBefore = host.badRequests.length;
      const second = await foreignCommit(w.bare, `${FOLDER}/from-git-2.txt`, "again\n");
      host.setStatus(second, "ci/approved", "success");
      w.worker().observeSoon();
      await waitFor("reads refused again", () =>
        host.badRequests.slice(refusedBefore).some((b) => b === "authorization undefined"),
      );
      expect(w.attempts).toHaveLength(1);
    } finally {
      await host.close();
    }
  });

  it("commit status report: the applied commit gets applygate/<namespace>/<claim> pending while the apply runs, then success", {
    timeout: 60_000,
  }, async () => {
    const host = await startStatusHost({ api: "gitea", owner: "git", repo: "site", token: "s3cret" });
    try {
      w = await world({
        appliedInitial: true,
        providerToken: "s3cret",
        providerSpec: { commitStatus: { apiURL: host.root, repository: "git/site" } },
        claimSpec: { commitStatusReport: { api: "gitea" } },
      });
      await w.startReplica();
      await waitFor("baseline", () => w.driver().state.observed);
      const foreign = await foreignCommit(w.bare, `${FOLDER}/from-git.txt`, "git side\n");
      w.worker().observeSoon();
      await waitFor(
        "the apply succeeded",
        async () => (await w.claim()).status?.lastAppliedCommit === foreign,
      );
      await waitFor("both statuses posted", () => host.posted.length === 2);
      expect(host.posted.map((p) => [p.sha, p.state, p.context])).toEqual([
        [foreign, "pending", `applygate/${NS}/claim`],
        [foreign, "success", `applygate/${NS}/claim`],
      ]);
      expect(host.badRequests).toEqual([]);
    } finally {
      await host.close();
    }
  });
  it("signature approval: a foreign commit signed by an untrusted SSH key waits with AwaitingApproval (SignatureUntrusted) while API edits reach Git; its key added to the Secret, one apply runs; an unsigned one waits (CommitUnsigned)", {
    timeout: 60_000,
  }, async () => {
    const keysDir = await mkdtemp(join(tmpdir(), "applygate-keys-"));
    const ada = sshKey(keysDir, "ed25519", "ada@release");
    const eve = sshKey(keysDir, "ecdsa", "eve@laptop");
    const sshSigning = (k: SshSigner) => ({ config: ["gpg.format=ssh", `user.signingkey=${k.keyPath}`] });
    // An OpenPGP key made by gpg when the machine has it (the pure tests cover both formats).
    const grace = hasGpg ? gpgKey(keysDir, "Grace <grace@example.test>") : undefined;
    w = await world({
      appliedInitial: true,
      claimSpec: { approval: { signature: { secretRef: { name: "release-keys" } } } },
    });
    const core = w.api.kubeConfig().makeApiClient(k8s.CoreV1Api);
    await core.createNamespacedSecret({
      namespace: NS,
      body: { metadata: { name: "release-keys" }, stringData: { authorized_keys: `${ada.publicKey}\n` } },
    });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    type Awaiting = { commit: string; missing: string[]; signature?: { reason: string; message: string } };
    const awaiting = async () =>
      ((await w.claim()).status?.governance as { awaitingApproval?: Awaiting[] } | undefined)
        ?.awaitingApproval;
    const condition = async () =>
      (
        (await w.claim()).status?.conditions as
          | { type: string; reason: string; message: string }[]
          | undefined
      )?.find((c) => c.type === "ApplyAllowed");

    const foreign = await foreignCommit(
      w.bare,
      `${FOLDER}/from-git.txt`,
      "git side\n",
      "main",
      sshSigning(eve),
    );
    w.worker().observeSoon();
    await waitFor("the claim waits: signed by a key not trusted", async () => {
      return (await awaiting())?.some(
        (a) => a.commit === foreign && a.signature?.reason === "SignatureUntrusted",
      );
    });
    expect((await condition())?.reason).toBe("AwaitingApproval");
    expect((await condition())?.message).toMatch(
      /\(Signature: signed by SSH key SHA256:\S+ \(ecdsa-sha2-nistp256\)/,
    );

    // API edits keep reaching Git meanwhile, and still no apply.
    const edit = await w.accept("a", "1", { save: true });
    const tip = await waitFor("the edit published", () => w.published(edit.id));
    await waitFor(
      "the read of the new tip",
      () => w.driver().state.appliers[CLAIM_KEY]?.foreignRead?.tip === tip,
    );
    await w.driver().idle();
    expect(w.attempts).toHaveLength(0);

    // Eve's key trusted: the Secret's watch tells the branch, the signatures are checked again.
    await core.patchNamespacedSecret(
      {
        namespace: NS,
        name: "release-keys",
        body: {
          stringData: {
            authorized_keys: `${ada.publicKey}\n${eve.publicKey}\n`,
            ...(grace ? { "grace.asc": grace.publicKey } : {}),
          },
        },
      },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
    );
    await waitFor("the approved apply", () => w.attempts.length === 1);
    expect(w.attempts[0]?.commit).toBe(tip);
    expect(w.attempts[0]?.approvals).toMatchObject([{ commit: foreign, sources: ["Signature"] }]);
    expect(w.attempts[0]?.approvals?.[0]?.signedBy).toMatch(/^SHA256:/);
    await waitFor("the apply succeeded", async () => (await w.claim()).status?.lastAppliedCommit === tip);
    await waitFor("nothing left to decide", () => settled(w));

    // An unsigned commit under one signed by Ada: every foreign commit must be signed.
    const unsigned = await foreignCommit(w.bare, `${FOLDER}/plain.txt`, "plain\n");
    const signed = await foreignCommit(
      w.bare,
      `${FOLDER}/signed.txt`,
      "signed\n",
      "main",
      grace
        ? {
            config: ["gpg.format=openpgp", `user.signingkey=${grace.fingerprint}`],
            env: { GNUPGHOME: grace.home },
          }
        : sshSigning(ada),
    );
    w.worker().observeSoon();
    await waitFor("the unsigned commit holds the signed tip", async () => {
      const list = await awaiting();
      return (
        list?.length === 1 && list[0]?.commit === unsigned && list[0]?.signature?.reason === "CommitUnsigned"
      );
    });
    expect(w.driver().state.appliers[CLAIM_KEY]?.foreignRead?.signatures?.[signed]).toMatchObject({
      ok: true,
      ...(grace ? { key: grace.fingerprint, signer: "Grace <grace@example.test>" } : {}),
    });
    await w.driver().idle();
    expect(w.attempts).toHaveLength(1);

    // After a restart it still holds: nothing is applied, the claim still names the unsigned commit.
    await w.stopReplica();
    await w.startReplica();
    await waitFor("the read for the tip after the restart", () => {
      const r = w.driver().state.appliers[CLAIM_KEY]?.foreignRead;
      return r?.tip === signed && r.signatures?.[unsigned]?.ok === false;
    });
    await w.driver().idle();
    expect(w.attempts).toHaveLength(1);
    expect((await awaiting())?.map((a) => a.commit)).toEqual([unsigned]);
  });

  it("signature approval by tag (mode Tag, tagPattern v*): an untagged foreign commit waits (CommitNotTagged); a lightweight tag, an untrusted key's tag and a trusted tag off the pattern approve nothing; a trusted signed tag pushed later, with no new commit, lets one apply run that names the tag", {
    timeout: 60_000,
  }, async () => {
    const keysDir = await mkdtemp(join(tmpdir(), "applygate-keys-"));
    const ada = sshKey(keysDir, "ed25519", "ada@release");
    const eve = sshKey(keysDir, "ed25519", "eve@laptop");
    w = await world({
      appliedInitial: true,
      claimSpec: {
        approval: { signature: { secretRef: { name: "release-keys" }, mode: "Tag", tagPattern: "v*" } },
      },
      commitStatusPollMs: 100,
    });
    const core = w.api.kubeConfig().makeApiClient(k8s.CoreV1Api);
    await core.createNamespacedSecret({
      namespace: NS,
      body: { metadata: { name: "release-keys" }, stringData: { authorized_keys: `${ada.publicKey}\n` } },
    });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    type Awaiting = { commit: string; missing: string[]; signature?: { reason: string; message: string } };
    const awaiting = async () =>
      ((await w.claim()).status?.governance as { awaitingApproval?: Awaiting[] } | undefined)
        ?.awaitingApproval;
    const waitsWith = (commit: string, reason: string, message?: RegExp) =>
      waitFor(`the claim waits: ${reason}`, async () =>
        (await awaiting())?.some(
          (a) =>
            a.commit === commit &&
            a.signature?.reason === reason &&
            (message === undefined || message.test(a.signature.message)),
        ),
      );
    // Tags pushed as another writer would: straight into the served repository.
    const tag = async (args: string[], signer?: SshSigner) =>
      gitOk(
        [
          ...(signer ? ["-c", "gpg.format=ssh", "-c", `user.signingkey=${signer.keyPath}`] : []),
          "tag",
          ...args,
        ],
        { cwd: w.bare },
      );

    const foreign = await foreignCommit(w.bare, `${FOLDER}/release.txt`, "release\n");
    w.worker().observeSoon();
    await waitsWith(foreign, "CommitNotTagged", /no annotated tag matching "v\*"/);

    await tag(["v0", foreign]);
    await waitsWith(foreign, "CommitUnsigned", /tag v0 is a lightweight tag/);
    await tag(["-s", "-m", "release by eve", "v0.9", foreign], eve);
    await waitsWith(foreign, "SignatureUntrusted", /^tag v0\.9: /);
    await tag(["-s", "-m", "nightly", "nightly-1", foreign], ada);
    // Every tag is read again while the commit waits: still nothing approves it.
    const reads = () => w.driver().state.appliers[CLAIM_KEY]?.foreignRead;
    await w.driver().idle();
    expect(reads()?.signatures?.[foreign]).toMatchObject({ ok: false, reason: "SignatureUntrusted" });
    expect(w.attempts).toHaveLength(0);

    // After a restart the tags are still read again while the commit waits.
    await w.stopReplica();
    await w.startReplica();
    await waitFor("the read kept or made again after the restart", () => reads()?.tip === foreign);
    await w.driver().idle();
    expect(w.attempts).toHaveLength(0);

    // The release manager tags the release: no new commit, the next read of the tags approves it.
    await tag(["-s", "-m", "release 1.0.0", "v1.0.0", foreign], ada);
    await waitFor("the approved apply", () => w.attempts.length === 1);
    expect(w.attempts[0]?.commit).toBe(foreign);
    const approvals = w.attempts[0]?.approvals;
    expect(approvals).toMatchObject([{ commit: foreign, sources: ["Signature"], tag: { name: "v1.0.0" } }]);
    expect(approvals?.[0]?.signedBy).toMatch(/^SHA256:/);
    expect(approvals?.[0]?.tag?.signedBy).toBe(approvals?.[0]?.signedBy);
    expect(approvals?.[0]?.by?.[0]).toContain("[tag v1.0.0]");
    await waitFor("the apply succeeded", async () => (await w.claim()).status?.lastAppliedCommit === foreign);
    await waitFor("nothing left to decide", () => settled(w));
    expect(w.attempts).toHaveLength(1);
  });
});
