import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SignatureReader } from "../queue/apply/signature-approval.js";
import type { Attempt } from "../queue/contract.js";
import { crdFiles } from "../queue/crds/files.js";
import { StatusReason } from "../queue/crds/reasons.js";
import {
  commitFile,
  gpgKey,
  hasGpg,
  rawCommit,
  sshKey,
  stopGpgAgents,
  workRepo,
} from "../queue/git/signing-testing.js";
import { type KObject, Kube, RESOURCES } from "../queue/kube/index.js";
import { type ApiServer, startApiServer } from "../test/cluster/apiserver/index.js";
import { makeAttempt } from "../test/support/attempts.js";
import { readTrustedFingerprints } from "./signature-check.js";
import { judgeStanding, recheckStanding } from "./standing.js";

const COMMIT = "c".repeat(40);
const attempt = (approvals?: Attempt["approvals"]): Attempt =>
  makeAttempt({ namespace: "apps", commit: COMMIT, ...(approvals ? { approvals } : {}) });
const inControl = {
  conditions: [
    {
      type: "InControl",
      status: "True",
      reason: "Suspended",
      message: "",
      lastTransitionTime: "2026-01-01T00:00:00Z",
    },
  ],
};
const claim = (approval: Record<string, unknown>): KObject => ({
  metadata: { name: "web", namespace: "apps" },
  spec: { kustomizationRef: { name: "web" }, approval },
  status: inControl,
});
const target: KObject = {
  metadata: { name: "one", namespace: "apps", uid: "u1" },
  spec: { branch: "main", claimRef: { kind: "FluxClaim", name: "web" } },
};
const signature = { signature: { secretRef: { name: "release-keys" } } };
const judge = (c: KObject, a: Attempt, keys?: Parameters<typeof judgeStanding>[0]["signatureKeys"]) =>
  judgeStanding({
    attempt: a,
    claim: c,
    grants: [],
    targets: new Map([["apps/one", target]]),
    ...(keys ? { signatureKeys: keys } : {}),
  });
const signedBy = (key: string) => [{ commit: COMMIT, sources: ["Signature"], signedBy: key }];

describe("signature approval at the write (pure)", () => {
  it("goes while the key that signed each commit is still trusted", () => {
    expect(
      judge(claim(signature), attempt(signedBy("SHA256:ada")), { ok: true, keys: new Set(["SHA256:ada"]) }),
    ).toMatchObject({
      ok: true,
    });
  });

  it("a key removed from the Secret since the send starts nothing: NotApproved, naming the commit and key", () => {
    const out = judge(claim(signature), attempt(signedBy("SHA256:ada")), {
      ok: true,
      keys: new Set(["SHA256:eve"]),
    });
    expect(out).toMatchObject({ ok: false, phase: "RequestFailed", reason: StatusReason.NotApproved });
    expect((out as { message: string }).message).toBe(
      `signing key no longer trusted since the send: ${COMMIT.slice(0, 12)} (SHA256:ada) (Signature)`,
    );
  });

  it("in a tag mode the tag's key must still be trusted too (TagAndHEAD: the commit's and the tag's)", () => {
    const tagged = (commitKey: string, tagKey: string) => [
      {
        commit: COMMIT,
        sources: ["Signature"],
        signedBy: commitKey,
        tag: { name: "v1.0.0", signedBy: tagKey },
      },
    ];
    const keys = { ok: true as const, keys: new Set(["SHA256:ada", "SHA256:grace"]) };
    expect(judge(claim(signature), attempt(tagged("SHA256:ada", "SHA256:grace")), keys)).toMatchObject({
      ok: true,
    });
    const out = judge(claim(signature), attempt(tagged("SHA256:ada", "SHA256:eve")), keys);
    expect(out).toMatchObject({ ok: false, phase: "RequestFailed", reason: StatusReason.NotApproved });
    expect((out as { message: string }).message).toBe(
      `signing key no longer trusted since the send: ${COMMIT.slice(0, 12)} (tag v1.0.0: SHA256:eve) (Signature)`,
    );
  });

  it("keys that cannot be read trust nothing, and an approval without a signing key is none", () => {
    expect(
      judge(claim(signature), attempt(signedBy("SHA256:ada")), { ok: false, message: "gone" }),
    ).toMatchObject({
      reason: StatusReason.NotApproved,
      message: "the keys cannot be read at the write: gone",
    });
    expect(judge(claim(signature), attempt(signedBy("SHA256:ada")))).toMatchObject({
      reason: StatusReason.NotApproved,
    });
    const manualOnly = [{ commit: COMMIT, sources: ["Manual"] }];
    expect(judge(claim(signature), attempt(manualOnly), { ok: true, keys: new Set() })).toMatchObject({
      reason: StatusReason.NotApproved,
    });
  });

  it("a claim requiring no signature is not asked about keys", () => {
    expect(judge(claim({}), attempt())).toMatchObject({ ok: true });
  });
});

describe("signature approval at the write (the executor's reads)", () => {
  let server: ApiServer;
  let kube: Kube;
  const dir = mkdtempSync(join(tmpdir(), "sig-check-"));
  const ada = sshKey(dir, "ed25519", "ada");
  const eve = sshKey(dir, "rsa", "eve");
  const setKeys = (text: string) =>
    kube.core.replaceNamespacedSecret({
      namespace: "apps",
      name: "release-keys",
      body: { metadata: { name: "release-keys", namespace: "apps" }, stringData: { keys: text } },
    });
  beforeAll(async () => {
    server = await startApiServer();
    for (const f of crdFiles()) await server.installCrdFile(f);
    kube = new Kube(server.kubeConfig());
    await kube.core.createNamespace({ body: { metadata: { name: "apps" } } });
    await kube.core.createNamespacedSecret({
      namespace: "apps",
      body: {
        metadata: { name: "release-keys" },
        stringData: { keys: `${ada.publicKey}\n${eve.publicKey}\n` },
      },
    });
    await kube.apply(RESOURCES.fluxClaim, {
      apiVersion: "applygate.dev/v1alpha1",
      kind: "FluxClaim",
      metadata: { name: "web", namespace: "apps" },
      spec: { kustomizationRef: { name: "web", namespace: "apps" }, approval: signature },
    });
    const c = await kube.get<KObject>(RESOURCES.fluxClaim, "apps", "web");
    await kube.patchStatus(RESOURCES.fluxClaim, "apps", "web", inControl, c?.metadata.resourceVersion);
    await kube.apply(RESOURCES.gitTarget, {
      apiVersion: "applygate.dev/v1alpha1",
      kind: "GitTarget",
      metadata: { name: "one", namespace: "apps" },
      spec: {
        providerRef: { name: "gp" },
        branch: "main",
        path: "apps",
        claimRef: { kind: "FluxClaim", name: "web" },
      },
    });
  });
  afterAll(async () => {
    await server?.close();
    await stopGpgAgents();
  });

  it("the worker's signing key and the executor's fingerprint are the same name (SSH and OpenPGP)", async () => {
    const pgp = hasGpg ? gpgKey(dir) : undefined;
    const { dir: repo } = workRepo();
    const commits = [commitFile(repo, "a", "a", ada), ...(pgp ? [commitFile(repo, "p", "p", pgp)] : [])];
    const data = { keys: Buffer.from(`${ada.publicKey}\n${pgp?.publicKey ?? ""}`).toString("base64") };
    const read = await new SignatureReader(async () => ({ ok: true, data })).read(
      { secret: { namespace: "apps", name: "release-keys" }, mode: "HEAD" },
      commits,
      async (oid) => rawCommit(repo, oid),
    );
    await setKeys(`${ada.publicKey}\n${pgp?.publicKey ?? ""}`);
    const trusted = await readTrustedFingerprints(kube, {
      secret: { namespace: "apps", name: "release-keys" },
      mode: "HEAD",
    });
    for (const c of commits) {
      const v = read.signatures[c];
      expect(v?.ok).toBe(true);
      expect(trusted.ok && trusted.keys.has((v as { key: string }).key)).toBe(true);
    }
  });

  it("recheckStanding reads the Secret again: a key removed since the send ends the attempt NotApproved", async () => {
    const keys = await readTrustedFingerprints(kube, {
      secret: { namespace: "apps", name: "release-keys" },
      mode: "HEAD",
    });
    await setKeys(`${ada.publicKey}\n${eve.publicKey}\n`);
    const both = await readTrustedFingerprints(kube, {
      secret: { namespace: "apps", name: "release-keys" },
      mode: "HEAD",
    });
    const eveKey = [...(both.ok ? both.keys : [])].find((k) => !(keys.ok && keys.keys.has(k))) as string;
    const targets = [
      {
        ...attempt().targets[0],
        uid: (await kube.get<KObject>(RESOURCES.gitTarget, "apps", "one"))?.metadata.uid as string,
      },
    ];
    const a = { ...attempt(signedBy(eveKey)), targets } as Attempt;
    expect(await recheckStanding(kube, a)).toMatchObject({ ok: true });
    await setKeys(`${ada.publicKey}\n`);
    const out = await recheckStanding(kube, a);
    expect(out).toMatchObject({ ok: false, reason: StatusReason.NotApproved });
    expect((out as { message: string }).message).toContain(`(${eveKey}) (Signature)`);
  });

  it("a keys Secret that is gone trusts nothing", async () => {
    expect(
      await readTrustedFingerprints(kube, { secret: { namespace: "apps", name: "missing" }, mode: "HEAD" }),
    ).toEqual({ ok: false, message: "the keys Secret apps/missing does not exist" });
  });
});
