#!/usr/bin/env node
// Entry point of the `applygate` command. Beside the compiled main.js (the image, or dist/ after
// `npm run build`) it runs plain JavaScript; in a checkout, where only main.ts is here, it loads the
// TypeScript sources through tsx, a dev dependency. The build copies this file as it is.
import { existsSync } from "node:fs";

const compiled = new URL("./main.js", import.meta.url);
let entry;
if (existsSync(compiled)) {
  entry = compiled.href;
} else {
  const { register } = await import("tsx/esm/api");
  register();
  entry = new URL("./main.ts", import.meta.url).href;
}
const { main } = await import(entry);
const code = await main(process.argv.slice(2));
// A command that failed exits at once: a connection it opened while trying must not hold the
// process (started commands close theirs and end with 0).
if (code !== 0) process.exit(code);
process.exitCode = code;
