/**
 * The other half of the alerts' guarantee: the processes really register the names in
 * queue/metric-names.ts. Registrations are read from the source of gateway/, queue/ and sidecar/
 * (`name: METRIC_NAMES.<key>` in a prom-client metric, with its `labelNames`), so the check needs
 * no Redis and no running process. Once every process has its entry point, every name must be
 * registered somewhere; until then the coverage check says which entry points are missing.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { ALL_METRIC_NAMES, METRIC_LABELS, METRIC_NAMES } from "../../queue/metric-names.js";
import { REPO_ROOT } from "./kustomize.js";

const ENTRY_POINTS = ["gateway/main.ts", "queue/worker-main.ts", "sidecar/main.ts"];

function sourceFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) out.push(...sourceFiles(path));
    else if (entry.endsWith(".ts") && !entry.endsWith(".test.ts") && !entry.endsWith("metric-names.ts"))
      out.push(path);
  }
  return out;
}

interface Registration {
  name: string;
  labels: string[] | undefined;
  file: string;
}

/** Finds `name: METRIC_NAMES.key` in metric constructors and the `labelNames` beside it. */
function readRegistrations(source: string, file: string): Registration[] {
  const out: Registration[] = [];
  const names = METRIC_NAMES as Record<string, string>;
  for (const m of source.matchAll(/name:\s*METRIC_NAMES\.(\w+)/g)) {
    const key = m[1] ?? "";
    const rest = source.slice((m.index ?? 0) + m[0].length);
    const end = rest.search(/new\s+(Gauge|Counter|Histogram|Summary)\b|name:\s*METRIC_NAMES\./);
    const body = end === -1 ? rest : rest.slice(0, end);
    const labels = /labelNames:\s*\[([^\]]*)\]/.exec(body)?.[1];
    out.push({
      name: names[key] ?? `unknown key METRIC_NAMES.${key}`,
      labels:
        labels
          ?.split(",")
          .map((l) => l.trim().replace(/^["']|["']$/g, ""))
          .filter(Boolean) ?? [],
      file,
    });
  }
  return out;
}

const registrations = ["gateway", "queue", "sidecar"]
  .flatMap((d) => sourceFiles(resolve(REPO_ROOT, d)))
  .flatMap((f) => readRegistrations(readFileSync(f, "utf8"), relative(REPO_ROOT, f)));
const missingEntryPoints = ENTRY_POINTS.filter((p) => !existsSync(resolve(REPO_ROOT, p)));
if (missingEntryPoints.length > 0)
  console.warn(`NOTICE: metric coverage is checked once these exist: ${missingEntryPoints.join(", ")}`);

describe("metrics registered by the processes", () => {
  it("reads a registration and its labels from source", () => {
    const src = `new Gauge({ name: METRIC_NAMES.queueJobs, help: "x", labelNames: ["queue", "state"] });
      new Counter({ name: METRIC_NAMES.jobsFailedTotal, help: "y" });`;
    expect(readRegistrations(src, "f.ts")).toEqual([
      { name: "applygate_queue_jobs", labels: ["queue", "state"], file: "f.ts" },
      { name: "applygate_jobs_failed_total", labels: [], file: "f.ts" },
    ]);
  });

  it.each(registrations.map((r) => ({ ...r, where: `${r.name} in ${r.file}` })))(
    "$where carries the documented labels",
    (r) => {
      expect(ALL_METRIC_NAMES).toContain(r.name);
      expect([...(r.labels ?? [])].sort()).toEqual(
        [...METRIC_LABELS[r.name as keyof typeof METRIC_LABELS]].sort(),
      );
    },
  );

  it.skipIf(missingEntryPoints.length > 0)(
    "cover every name the alerts watch once every process exists",
    () => {
      const registered = new Set(registrations.map((r) => r.name));
      expect(
        ALL_METRIC_NAMES.filter((n) => !registered.has(n)),
        "registered nowhere",
      ).toEqual([]);
    },
  );
});
