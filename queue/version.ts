/**
 * The version of applygate this process runs: package.json's, found beside the sources (a
 * checkout) or beside the compiled output (the image copies package.json to /app, above dist/).
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export function applygateVersion(from: string = dirname(fileURLToPath(import.meta.url))): string {
  for (let dir = from; ; dir = dirname(dir)) {
    const file = join(dir, "package.json");
    if (existsSync(file)) {
      const pkg = JSON.parse(readFileSync(file, "utf8")) as { name?: string; version?: string };
      if (pkg.name === "applygate" && pkg.version) return pkg.version;
    }
    if (dirname(dir) === dir) return "unknown";
  }
}
