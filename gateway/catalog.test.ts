import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterAll, describe, expect, it } from "vitest";
import { ConfigError } from "../queue/config.js";
import { branchKey } from "../queue/contract.js";
import { errorMessage } from "../queue/errors.js";
import { fixtureObjects, fixtureYaml, NS, pathOf, SECRETS, URLS } from "../test/support/gateway.js";
import { untilWith } from "../test/support/wait.js";
import { buildSnapshot, type Catalog } from "./catalog.js";
import { FileCatalog, parseCatalogText } from "./catalog-file.js";
import { hookPath } from "./verify.js";

const until = untilWith({ timeoutMs: 10_000, everyMs: 20 });

describe("snapshot", () => {
  it("derives the receiver path the way Flux does", () => {
    expect(hookPath("token", "github-receiver", "flux-system")).toBe(
      "/hook/8ed710969b945c0dc10d6d0b5084e120ec2228353d1fe42d56be5ba88500e684",
    );
  });

  it("finds providers by path, targets by name, and the targets writing a branch", () => {
    const snap = buildSnapshot(fixtureObjects());
    const github = snap.providerByHookPath(pathOf(SECRETS.github, "github"))!;
    expect(github).toMatchObject({
      name: "github",
      type: "github",
      repository: "github.com/Codertocat/Hello-World",
    });
    expect(snap.targetsWriting(github, "master").map((t) => t.name)).toEqual(["hello"]);
    expect(snap.targetsWriting(github, "main")).toEqual([]);
    expect(snap.target(NS, "infra")).toMatchObject({
      branchKey: branchKey({ namespace: NS, name: "generic" }, URLS.generic, "main"),
      intakeToken: SECRETS.intakeToken,
      intakeHmacKey: SECRETS.intakeHmac,
    });
    // A provider whose Secret is missing has no path: it is not ready.
    expect(snap.providers.find((p) => p.name === "nosecret")!.hookPath).toBeUndefined();
  });

  it("lets a target in another namespace use a provider only when the provider grants it", () => {
    const objects = fixtureObjects();
    const foreign = {
      ...objects.targets[0]!,
      metadata: { name: "foreign", namespace: "team-b" },
      spec: { ...objects.targets[0]!.spec, providerRef: { name: "github", namespace: NS } },
    };
    const denied = buildSnapshot({ ...objects, targets: [foreign] });
    expect(denied.target("team-b", "foreign")!.problem).toBe(
      "ProviderNamespaceNotAllowed: GitProvider apps/github does not admit namespace team-b (spec.accessFrom.namespaces)",
    );
    const github = objects.providers[0]!;
    const granting = { ...github, spec: { ...github.spec, accessFrom: { namespaces: ["team-b"] } } };
    const allowed = buildSnapshot({ ...objects, providers: [granting], targets: [foreign] });
    expect(allowed.target("team-b", "foreign")!.branchKey).toBe(
      branchKey({ namespace: NS, name: "github" }, URLS.github, "master"),
    );
  });
});

describe("file catalog", () => {
  const dir = mkdtempSync(join(tmpdir(), "applygate-catalog-"));
  const file = join(dir, "catalog.yaml");
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("names the bad document and field", () => {
    expect(() =>
      parseCatalogText(
        "apiVersion: applygate.dev/v1alpha1\nkind: GitProvider\nmetadata: {name: x}\nspec: {url: 'ftp://x', type: github, webhookSecretRef: {name: s}}\n",
      ),
    ).toThrow(/document 1 \(GitProvider x\): spec.url/);
  });

  it("refuses to start on a bad file with one line", () => {
    writeFileSync(file, "kind: [unclosed\n");
    let err: unknown;
    try {
      new FileCatalog(file);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect(errorMessage(err)).toMatch(/^invalid setting --config: /);
    expect(errorMessage(err)).not.toContain("\n");
  });

  it("reloads on change: a rotated Secret moves the receiver path; a bad edit keeps the last good", async () => {
    writeFileSync(file, fixtureYaml());
    // What the catalog logs, so the test can wait for its verdict on the bad edit.
    const logged: string[] = [];
    const log = pino({ level: "info" }, { write: (line: string) => void logged.push(line) });
    const catalog: Catalog = new FileCatalog(file, log, 10);
    try {
      expect(catalog.snapshot().providerByHookPath(pathOf(SECRETS.github, "github"))).toBeDefined();
      const objects = fixtureObjects();
      objects.secrets = objects.secrets.map((s) =>
        s.name === "github-webhook" ? { ...s, data: { token: "rotated" } } : s,
      );
      writeFileSync(file, fixtureYaml(objects));
      await until(
        () => catalog.snapshot().providerByHookPath(pathOf("rotated", "github")) !== undefined,
        "reload",
      );
      expect(catalog.snapshot().providerByHookPath(pathOf(SECRETS.github, "github"))).toBeUndefined();
      const before = logged.length;
      writeFileSync(
        file,
        "apiVersion: applygate.dev/v1alpha1\nkind: GitTarget\nmetadata: {name: broken}\nspec: {}\n",
      );
      await until(
        () => logged.slice(before).some((l) => l.includes("catalog file rejected")),
        "the bad edit to be rejected",
      );
      expect(catalog.snapshot().providerByHookPath(pathOf("rotated", "github"))).toBeDefined();
    } finally {
      await catalog.close();
    }
  });
});
