import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import {
  classLengths,
  errorCasts,
  exponentials,
  type Found,
  kubeClients,
  objectCasts,
  productFiles,
} from "./code-shapes.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
const files = productFiles(root);
const each = (find: (file: string, text: string) => Found[]) =>
  files.flatMap((f) => find(f, readFileSync(`${root}${f}`, "utf8")).map((x) => ({ file: f, ...x })));
const perFile = (found: { file: string }[]) => {
  const out: Record<string, number> = {};
  for (const x of found) out[x.file] = (out[x.file] ?? 0) + 1;
  return out;
};

/**
 * Exponentials that are no backoff of ours: size units, and Argo CD's own retry schedule, which
 * the sidecar computes to say when Argo CD retries (its factor is the Application's).
 */
const OTHER_EXPONENTIALS: Record<string, number> = {
  "queue/backoff.ts": 1,
  "queue/config.ts": 2,
  "sidecar/argocd/sync.ts": 1,
};

describe("product code", () => {
  it("reads the whole product", () => {
    expect(files.length).toBeGreaterThan(100);
  });

  it("casts no Kubernetes object's spec, status or metadata: each is read through a typed reader", () => {
    expect(each(objectCasts).map((c) => `${c.file}:${c.line} ${c.text}`)).toEqual([]);
  });

  it("casts no caught value to Error: it is read through queue/errors.ts (errorMessage, errorCode)", () => {
    expect(each(errorCasts).map((c) => `${c.file}:${c.line} ${c.text}`)).toEqual([]);
  });

  it("has no class over 600 lines: a class that long holds more than one concern", () => {
    const long = files
      .flatMap((f) => classLengths(f, readFileSync(`${root}${f}`, "utf8")))
      .filter((c) => c.lines > 600)
      .map((c) => `${c.name} ${c.lines} lines`);
    expect(long).toEqual([]);
  });

  it("has one exponential backoff: queue/backoff.ts", () => {
    expect(perFile(each(exponentials))).toEqual(OTHER_EXPONENTIALS);
  });

  it("builds Kubernetes API clients only in queue/kube/: every request goes through Kube", () => {
    const outside = each(kubeClients).filter((c) => !c.file.startsWith("queue/kube/"));
    // The startup check's discovery probe (GET /api), made from the kubeconfig before the process
    // builds anything, to say that the API server answers.
    expect(perFile(outside)).toEqual({ "queue/startup-check.ts": 1 });
  });
});

describe("the shape finders", () => {
  it("find a cast of spec, status or metadata however it is written", () => {
    const code = [
      "const a = claim.spec as { ref?: string };",
      "const b = (claim.status ?? {}) as Record<string, unknown>;",
      "const c = (x?.metadata as\n  | { generation?: number }\n  | undefined)?.generation;",
      "const d = <Status>claim.status;",
      "const e = (claim.status! || {}) as never;",
      "const ok = claim.spec.kustomizationRef as ObjectKey;",
      "const ok2 = { spec: 1 } as const; const ok3 = read(claim) as Claim; const ok4 = spec as Spec;",
    ].join("\n");
    expect(objectCasts("f.ts", code).map((c) => c.line)).toEqual([1, 2, 3, 6, 7]);
  });

  it("find a cast to Error however it is written", () => {
    const code = [
      "log.warn({ err: (err as Error).message });",
      "const e = <Error>err;",
      "const f = err as Error & { code?: number };",
      "if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;",
      "const g = (err as\n  | Error\n  | undefined)?.message;",
      "const h = (err as { cause?: Error }).cause;",
      "p.catch((err: Error) => log(err.message));",
      "p.then(() => 1, function (err: NodeJS.ErrnoException) { return err.code; });",
      "const ok = new Error('x'); if (err instanceof Error) throw err; const ok2: Error = ok;",
      "const ok3 = err as GitRemoteError; const ok4 = x as ErrorReason; p.catch((err: unknown) => err);",
      "p.then((v: Error) => v); const ok5 = errorMessage(err) as string;",
      "const ok6 = (await pipeline.exec()) as [Error | null, string][]; const ok7 = x as Promise<Error>;",
    ].join("\n");
    expect(errorCasts("f.ts", code).map((c) => c.line)).toEqual([1, 2, 3, 4, 5, 8, 9, 10]);
  });

  it("measure a class from its line to its closing brace", () => {
    const code = "const x = 1;\nexport class A {\n  f() {\n  }\n}\nclass B {}\nconst C = class {\n};\n";
    expect(classLengths("f.ts", code)).toEqual([
      { name: "f.ts:A", line: 2, lines: 4 },
      { name: "f.ts:B", line: 6, lines: 1 },
      { name: "f.ts:(anonymous)", line: 7, lines: 2 },
    ]);
  });

  it("find an API client or request header built by hand", () => {
    const code = [
      "const custom = kc.makeApiClient(k8s.CustomObjectsApi);",
      'const MERGE = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);',
      "const core = new k8s.CoreV1Api(config); const events = new EventsV1Api(config);",
      "const ok = new Kube(kc); const ok2 = kube.apply(t, o); const ok3 = new Map();",
    ].join("\n");
    expect(kubeClients("f.ts", code).map((c) => c.line)).toEqual([1, 2, 3, 3]);
  });

  it("find an exponential", () => {
    const code = "const a = 100 * 2 ** n;\nconst b = Math.pow(2, n);\nconst c = n * 2;";
    expect(exponentials("f.ts", code).map((c) => c.line)).toEqual([1, 2]);
  });
});
