/**
 * `npm run release:install-yaml`: the install.yaml of a release, one file a platform team can pin
 * (`kubectl apply --server-side -f install.yaml`): `kubectl kustomize manifests/base` (CRDs, RBAC,
 * gateway, worker, mirror, Redis) with the image tag of this version. Refuses to render when the
 * versions component names another tag than package.json's version, so a release's file never
 * runs another release's image. Writes dist/release/<version>/install.yaml (or the folder given).
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parse, parseAllDocuments } from "yaml";
import { errorMessage } from "../../queue/errors.js";

const ROOT = resolve(fileURLToPath(new URL("../..", import.meta.url)));

/** The image every component runs, as the versions component names it. */
export function releaseImage(root = ROOT): { repository: string; tag: string; version: string } {
  const version = (JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string })
    .version;
  const versions = parse(
    readFileSync(join(root, "manifests/components/versions/kustomization.yaml"), "utf8"),
  ) as {
    images: { name: string; newName: string; newTag: string }[];
  };
  const image = versions.images.find((i) => i.name === "applygate");
  if (!image) throw new Error("manifests/components/versions names no image applygate");
  return { repository: image.newName, tag: image.newTag, version };
}

/** Why a release cannot be rendered as it stands (none: it can). Pure. */
export function releaseProblems(image: { tag: string; version: string }): string[] {
  return image.tag === image.version
    ? []
    : [
        `manifests/components/versions sets image tag ${image.tag}, package.json says version ${image.version}: set newTag to ${image.version}`,
      ];
}

/** The install.yaml text of this checkout's version. */
export function renderInstallYaml(root = ROOT): { version: string; text: string } {
  const image = releaseImage(root);
  const problems = releaseProblems(image);
  if (problems.length) throw new Error(problems.join("\n"));
  const built = execFileSync("kubectl", ["kustomize", join(root, "manifests/base")], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    maxBuffer: 64 << 20,
  });
  // Parsed once to refuse a build that is not YAML before anybody applies it.
  for (const d of parseAllDocuments(built)) if (d.errors.length) throw new Error(String(d.errors[0]));
  const head = [
    `# applygate ${image.version}: kubectl apply --server-side -f install.yaml`,
    `# Image ${image.repository}:${image.tag}. Rendered from manifests/base by npm run release:install-yaml.`,
    "---",
  ].join("\n");
  return { version: image.version, text: `${head}\n${built}` };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    const { version, text } = renderInstallYaml();
    const dir = resolve(process.argv[2] ?? join(ROOT, "dist/release", version));
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "install.yaml"), text);
    process.stdout.write(`${join(dir, "install.yaml")}\n`);
  } catch (err) {
    process.stderr.write(`release:install-yaml: ${errorMessage(err)}\n`);
    process.exitCode = 1;
  }
}
