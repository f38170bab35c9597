/**
 * applygate's own package.json, found beside the sources (a checkout) or beside the compiled
 * output (the image copies package.json to /app, above dist/): the version this process runs and
 * the commands the package declares beyond the built-in ones (queue/cli/commands.ts).
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export interface OwnPackage {
  /** The folder holding package.json. */
  dir: string;
  json: { name: string; version?: string; [key: string]: unknown };
}

const here = () => dirname(fileURLToPath(import.meta.url));

/** The nearest package.json named applygate at or above `from`. */
export function ownPackage(from: string = here()): OwnPackage | undefined {
  for (let dir = from; ; dir = dirname(dir)) {
    const file = join(dir, "package.json");
    if (existsSync(file)) {
      const json = JSON.parse(readFileSync(file, "utf8")) as OwnPackage["json"];
      if (json.name === "applygate") return { dir, json };
    }
    if (dirname(dir) === dir) return undefined;
  }
}

export function applygateVersion(from: string = here()): string {
  return ownPackage(from)?.json.version || "unknown";
}
