// Regenerates the godebug and replace lines of our tool modules from upstream's own go.mod files:
//   npx tsx test/real/tools/sync-replaces.ts [set…]      then: (cd test/real/tools/<set> && go mod tidy)
// Run it after changing a version in a require line; never edit the generated section by hand.
import { readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readUpstreamGoMod, setDir } from "./go.js";
import {
  deriveReplacements,
  formatReplacement,
  parseGoMod,
  renderGenerated,
  spliceGenerated,
  stagingReplacements,
  type Upstream,
} from "./gomod.js";
import { TOOL_SETS, type ToolSet, toolSet } from "./tools.js";

async function sync(tool: ToolSet): Promise<void> {
  const file = join(setDir(tool.set), "go.mod");
  const ours = await readFile(file, "utf8");
  const requires = new Map(parseGoMod(ours).requires.map((r) => [r.path, r.version]));
  const versionOf = (module: string): string => {
    const version = requires.get(module);
    if (!version) throw new Error(`${file} does not require ${module}`);
    return version;
  };
  const upstreams: Upstream[] = await Promise.all(
    tool.replacesFrom.map(async (module) => ({
      module: `${module}@${versionOf(module)}`,
      mod: parseGoMod(await readUpstreamGoMod(module, versionOf(module), tmpdir())),
    })),
  );
  const sources = upstreams.map((u) => u.module);
  let staging: ReturnType<typeof stagingReplacements> = [];
  if (tool.staging) {
    const version = versionOf("k8s.io/kubernetes");
    const kubernetes = upstreams.find((u) => u.module === `k8s.io/kubernetes@${version}`)?.mod;
    staging = stagingReplacements(
      kubernetes ?? parseGoMod(await readUpstreamGoMod("k8s.io/kubernetes", version, tmpdir())),
      version,
    );
    if (!kubernetes) sources.push(`k8s.io/kubernetes@${version} (staging modules)`);
  }
  const godebugFrom = tool.godebugFrom && `${tool.godebugFrom}@${versionOf(tool.godebugFrom)}`;
  const derived = deriveReplacements(upstreams, staging, godebugFrom);
  await writeFile(file, spliceGenerated(ours, renderGenerated(derived, sources)));
  console.log(
    `${tool.set}: ${derived.replaces.length} replace lines, godebug ${derived.godebug.join(" ") || "none"}`,
  );
  for (const { from, replace } of derived.skipped) {
    console.log(`  not restated (a folder of ${from}): ${formatReplacement(replace)}`);
  }
}

const wanted = process.argv.slice(2);
for (const tool of wanted.length > 0 ? wanted.map(toolSet) : TOOL_SETS) await sync(tool);
