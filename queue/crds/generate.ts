/** `npm run gen:crds`: writes manifests/base/crds/ from the zod schemas in this folder. */
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { renderCrdFiles } from "./crd.js";
import { CRD_DIR } from "./files.js";

const files = renderCrdFiles();
mkdirSync(CRD_DIR, { recursive: true });
for (const stale of readdirSync(CRD_DIR)) if (!files.has(stale)) rmSync(join(CRD_DIR, stale));
for (const [name, text] of files) writeFileSync(join(CRD_DIR, name), text);
process.stdout.write(`wrote ${files.size} files to ${CRD_DIR}\n`);
