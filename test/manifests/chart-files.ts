/**
 * The files the Helm chart reads with .Files.Get, copied from their one source in
 * manifests/monitoring (a chart cannot read outside its folder, and kustomize cannot either).
 * `npm run gen:chart` writes them; test/manifests/chart.test.ts fails while a copy differs.
 */
import { copyFileSync, mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

/** Source and copy, relative to the repository root. */
export const CHART_COPIES = [
  { from: "manifests/monitoring/prometheus-rule.yaml", to: "manifests/chart/files/prometheus-rule.yaml" },
  { from: "manifests/monitoring/dashboard.json", to: "manifests/chart/files/dashboard.json" },
] as const;

export function writeChartCopies(root = ROOT): void {
  for (const { from, to } of CHART_COPIES) {
    mkdirSync(dirname(resolve(root, to)), { recursive: true });
    copyFileSync(resolve(root, from), resolve(root, to));
    process.stdout.write(`copied ${from} to ${to}\n`);
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) writeChartCopies();
