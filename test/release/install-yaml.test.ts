import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { KUBECTL_AVAILABLE, REPO_ROOT } from "../manifests/kustomize.js";
import { releaseImage, releaseProblems } from "./install-yaml.js";

const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as {
  version: string;
  license: string;
  repository?: { type: string; url: string };
};

describe("a release", () => {
  it("refuses to render when the image tag is not package.json's version", () => {
    expect(releaseProblems({ tag: "0.1.0", version: "0.1.0" })).toEqual([]);
    expect(releaseProblems({ tag: "0.0.9", version: "0.1.0" })[0]).toMatch(
      /sets image tag 0\.0\.9.*version 0\.1\.0/,
    );
    expect(releaseImage().tag).toBe(pkg.version);
  });

  it("names its licence in full and its repository, and its changelog has this version", () => {
    expect(pkg.license).toBe("Apache-2.0");
    expect(readFileSync(join(REPO_ROOT, "LICENSE"), "utf8")).toMatch(
      /Apache License\s+Version 2\.0, January 2004/,
    );
    expect(pkg.repository?.url).toMatch(/^git\+https:\/\//);
    expect(readFileSync(join(REPO_ROOT, "CHANGELOG.md"), "utf8")).toContain(`## ${pkg.version}`);
  });

  it.skipIf(!KUBECTL_AVAILABLE)(
    "renders install.yaml with every component, each on this version's image",
    () => {
      const dir = mkdtempSync(join(tmpdir(), "applygate-release-"));
      const out = execFileSync(
        process.execPath,
        ["--import", "tsx", join(REPO_ROOT, "test/release/install-yaml.ts"), dir],
        {
          cwd: REPO_ROOT,
          encoding: "utf8",
        },
      );
      expect(out.trim()).toBe(join(dir, "install.yaml"));
      const text = readFileSync(join(dir, "install.yaml"), "utf8");
      expect(text.split("\n")[0]).toBe(
        `# applygate ${pkg.version}: kubectl apply --server-side -f install.yaml`,
      );
      const objects = parseAllDocuments(text)
        .map((d) => d.toJS() as { kind: string; metadata: { name: string }; spec?: any })
        .filter(Boolean);
      const names = objects.map((o) => `${o.kind}/${o.metadata.name}`);
      for (const want of [
        "Namespace/applygate-system",
        "Deployment/applygate-gateway",
        "Deployment/applygate-worker",
        "Deployment/applygate-mirror",
        "StatefulSet/applygate-redis",
        "CustomResourceDefinition/gittargets.applygate.dev",
      ])
        expect(names).toContain(want);
      const images = objects.flatMap((o) =>
        ((o.spec?.template?.spec?.containers ?? []) as { image: string }[]).map((c) => c.image),
      );
      const ours = images.filter((i) => i.includes("applygate/applygate"));
      expect(ours.length).toBeGreaterThanOrEqual(3);
      for (const image of ours) expect(image).toBe(`ghcr.io/applygate/applygate:${pkg.version}`);
    },
  );
});
