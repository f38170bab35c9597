/**
 * `npm run gen:crds`: writes manifests/base/crds/ (kustomize) and manifests/chart/crds/ (Helm) from
 * the zod schemas in this folder: the same bytes in both, so the two installs cannot drift.
 */
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { renderCrdFiles } from "./crd.js";
import { CRD_DIRS } from "./files.js";

const files = renderCrdFiles();
for (const dir of CRD_DIRS) {
  mkdirSync(dir, { recursive: true });
  for (const stale of readdirSync(dir)) if (!files.has(stale)) rmSync(join(dir, stale));
  for (const [name, text] of files) writeFileSync(join(dir, name), text);
  process.stdout.write(`wrote ${files.size} files to ${dir}\n`);
}
