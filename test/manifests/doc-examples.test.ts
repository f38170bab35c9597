/** Every YAML block in the Flux, Argo CD and webhook applier guides parses, and each of our kinds in it is valid. */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import {
  applierGrant,
  argoCDClaim,
  fluxClaim,
  gitProvider,
  gitTarget,
  watchRule,
  webhookClaim,
} from "../../queue/crds/index.js";

const SCHEMAS: Record<string, { safeParse(v: unknown): { success: boolean; error?: unknown } }> = {
  GitProvider: gitProvider,
  GitTarget: gitTarget,
  FluxClaim: fluxClaim,
  ArgoCDClaim: argoCDClaim,
  ApplierGrant: applierGrant,
  WatchRule: watchRule,
  WebhookClaim: webhookClaim,
};

function yamlBlocks(file: string): string[] {
  const text = readFileSync(new URL(`../../docs/${file}`, import.meta.url), "utf8");
  return [...text.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1] ?? "");
}

describe.each(["flux.md", "argocd.md", "mirror.md", "webhook-applier.md"])("docs/%s examples", (file) => {
  it("parse, and each applygate object is valid against its kind's schema", () => {
    const blocks = yamlBlocks(file);
    expect(blocks.length).toBeGreaterThan(0);
    let checked = 0;
    for (const block of blocks) {
      for (const doc of parseAllDocuments(block)) {
        expect(doc.errors, block).toEqual([]);
        const obj = doc.toJSON() as { apiVersion?: string; kind?: string } | null;
        if (!obj?.apiVersion?.startsWith("applygate.dev/")) continue;
        const schema = SCHEMAS[obj.kind ?? ""];
        expect(schema, `${obj.kind} in ${file}`).toBeDefined();
        const r = schema!.safeParse(obj);
        expect(r.success, `${obj.kind} in ${file}: ${JSON.stringify(r.error)}`).toBe(true);
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(0);
  });
});
