import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const CLI = fileURLToPath(new URL("../../queue/cli/applygate.mjs", import.meta.url));

function cli(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; out: string; err: string }> {
  return new Promise((done) => {
    execFile(process.execPath, [CLI, ...args], { env: { ...process.env, ...env } }, (e, out, err) =>
      done({ code: e ? ((e as { code?: number }).code ?? 1) : 0, out, err }),
    );
  });
}

describe("applygate playground --real", () => {
  let empty: string;
  beforeAll(async () => {
    empty = await mkdtemp(join(tmpdir(), "no-real-build-"));
  });
  afterAll(async () => {
    await rm(empty, { recursive: true, force: true });
  });

  it("without the real components built, says in one line what is missing and how to build it, exit 1", async () => {
    const r = await cli(["playground", "--real"], { APPLYGATE_REAL_CACHE: empty });
    expect(r.code).toBe(1);
    expect(r.out).toBe("");
    const lines = r.err.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^applygate playground --real: real components not built \(missing: .*kube-apiserver.*etcd.*\); build them with: npm run real:build$/,
    );
  });

  it("refuses another flag beside it, exit 2, and --help names it", async () => {
    const r = await cli(["playground", "--real", "--port", "8080"], {});
    expect(r.code).toBe(2);
    expect(r.err).toContain("takes no other flag (--port 8080)");
    const help = await cli(["playground", "--help"], {});
    expect(help.code).toBe(0);
    expect(help.out).toContain("--real");
  });
});
