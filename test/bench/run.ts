/**
 * `npm run bench [-- name ...]`: runs every benchmark module in this folder (each exports
 * `run(): Promise<Figure[]>`), or only the named ones, and prints one JSON line per figure.
 */
import { readdir } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { resolveEmbeddedRedis } from "../../queue/redis.js";
import { ensureRedisServer } from "../redis/install.js";
import type { Figure } from "./figure.js";

const here = dirname(fileURLToPath(import.meta.url));
const skip = new Set(["run.ts", "figure.ts"]);

async function main(): Promise<void> {
  const wanted = process.argv.slice(2).filter((a) => !a.startsWith("-"));
  const files = (await readdir(here)).filter(
    (f) => f.endsWith(".ts") && !skip.has(f) && !f.endsWith(".test.ts"),
  );
  const names = files.map((f) => f.replace(/\.ts$/, "")).sort();
  const unknown = wanted.filter((w) => !names.includes(w));
  if (unknown.length) {
    process.stderr.write(`unknown benchmark(s): ${unknown.join(", ")}; available: ${names.join(", ")}\n`);
    process.exitCode = 2;
    return;
  }
  const redis = await resolveEmbeddedRedis(process.env, { ensureServer: ensureRedisServer });
  process.env.TEST_REDIS_URL ??= redis.url;
  try {
    for (const name of wanted.length ? wanted : names) {
      const mod = (await import(pathToFileURL(join(here, `${name}.ts`)).href)) as {
        run?: () => Promise<Figure[]>;
      };
      if (typeof mod.run !== "function") continue;
      const figures = await mod.run();
      for (const f of figures) process.stdout.write(`${JSON.stringify(f)}\n`);
    }
  } finally {
    await redis.stop();
  }
}

await main();
