/**
 * Signature approval at the write: the executor checks each commit the apply would bring with the
 * worker's own reader (`SignatureReader`) against the keys Secret read by name now
 * (`keysFromKube`); the commits' walk and the refusal are approval-recheck.test.ts's. Here: the
 * executor's read of the Secret, a key removed since the last read, a Secret gone.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { StatusReason } from "../queue/crds/reasons.js";
import { SignatureReader } from "../queue/governance/signatures.js";
import { Kube } from "../queue/kube/index.js";
import { type ApiServer, startApiServer } from "../test/cluster/apiserver/index.js";
import {
  commitFile,
  gpgKey,
  hasGpg,
  rawCommit,
  sshKey,
  stopGpgAgents,
  workRepo,
} from "../test/support/signing.js";
import { keysFromKube } from "./signature-check.js";

describe("signature approval at the write (the executor's reads)", () => {
  let server: ApiServer;
  let kube: Kube;
  const dir = mkdtempSync(join(tmpdir(), "sig-check-"));
  const ada = sshKey(dir, "ed25519", "ada");
  const eve = sshKey(dir, "rsa", "eve");
  const spec = { secret: { namespace: "apps", name: "release-keys" }, mode: "HEAD" as const };
  const setKeys = (text: string) =>
    kube.core.replaceNamespacedSecret({
      namespace: "apps",
      name: "release-keys",
      body: { metadata: { name: "release-keys", namespace: "apps" }, stringData: { keys: text } },
    });
  beforeAll(async () => {
    server = await startApiServer();
    kube = new Kube(server.kubeConfig());
    await kube.core.createNamespace({ body: { metadata: { name: "apps" } } });
    await kube.core.createNamespacedSecret({
      namespace: "apps",
      body: {
        metadata: { name: "release-keys" },
        stringData: { keys: `${ada.publicKey}\n${eve.publicKey}\n` },
      },
    });
  });
  afterAll(async () => {
    await server?.close();
    await stopGpgAgents();
  });

  it("checks SSH and OpenPGP signatures against the Secret as read now: a key removed since approves nothing", async () => {
    const pgp = hasGpg ? gpgKey(dir) : undefined;
    const { dir: repo } = workRepo();
    const byEve = commitFile(repo, "e", "e", eve);
    const commits = [
      commitFile(repo, "a", "a", ada),
      ...(pgp ? [commitFile(repo, "p", "p", pgp)] : []),
      byEve,
    ];
    await setKeys(`${ada.publicKey}\n${eve.publicKey}\n${pgp?.publicKey ?? ""}`);
    const reader = new SignatureReader(keysFromKube(kube));
    const raw = async (oid: string) => rawCommit(repo, oid);
    const before = await reader.read(spec, commits, raw);
    for (const c of commits) expect(before.signatures[c]?.ok, c).toBe(true);
    await setKeys(`${ada.publicKey}\n${pgp?.publicKey ?? ""}`);
    const after = await reader.read(spec, commits, raw);
    expect(after.signatures[byEve]).toMatchObject({ ok: false });
    for (const c of commits.filter((x) => x !== byEve)) expect(after.signatures[c]?.ok, c).toBe(true);
  });

  it("a keys Secret that is gone trusts nothing", async () => {
    const { dir: repo } = workRepo();
    const c = commitFile(repo, "a", "a", ada);
    const read = await new SignatureReader(keysFromKube(kube)).read(
      { ...spec, secret: { namespace: "apps", name: "missing" } },
      [c],
      async (oid) => rawCommit(repo, oid),
    );
    expect(read.signatures[c]).toEqual({
      ok: false,
      reason: StatusReason.NoTrustedKeys,
      message: "the keys Secret apps/missing does not exist",
    });
  });
});
