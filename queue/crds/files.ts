/** Where the committed CRD YAML lives, so the playground and the simulated cluster install it from manifests/. */
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";
import { crdFileName } from "./crd.js";
import { KINDS } from "./index.js";

/** Absolute path of `manifests/base/crds/`. */
export const CRD_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "../../manifests/base/crds");

/** Absolute path of `manifests/chart/crds/`: the Helm chart's copy, written by the same generator. */
export const CHART_CRD_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "../../manifests/chart/crds");

/** Every folder `npm run gen:crds` writes the same files to. */
export const CRD_DIRS = [CRD_DIR, CHART_CRD_DIR] as const;

/** Absolute paths of our CRD YAML files (one CustomResourceDefinition each). */
export function crdFiles(): string[] {
  return KINDS.map((info) => join(CRD_DIR, crdFileName(info)));
}

/** Our CustomResourceDefinitions parsed from the committed YAML. */
export function crdObjects(): Record<string, unknown>[] {
  return crdFiles().map((file) => parse(readFileSync(file, "utf8")) as Record<string, unknown>);
}
