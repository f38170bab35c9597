/**
 * Reading pino's JSON lines as they were written. JSON.parse keeps the last of two equal keys, so
 * a key a logger bound twice only shows in the raw text: `topLevelKeys` lists every key of the
 * line's outer object, repeats included.
 */
import { Writable } from "node:stream";
import pino, { type Logger } from "pino";

export function topLevelKeys(line: string): string[] {
  const keys: string[] = [];
  let depth = 0;
  let i = 0;
  let expectKey = false;
  while (i < line.length) {
    const ch = line[i] as string;
    if (ch === '"') {
      let j = i + 1;
      while (j < line.length && line[j] !== '"') j += line[j] === "\\" ? 2 : 1;
      if (depth === 1 && expectKey) keys.push(JSON.parse(line.slice(i, j + 1)) as string);
      expectKey = false;
      i = j + 1;
      continue;
    }
    if (ch === "{" || ch === "[") {
      depth += 1;
      expectKey = depth === 1 && ch === "{";
    } else if (ch === "}" || ch === "]") depth -= 1;
    else if (ch === "," && depth === 1) expectKey = true;
    i += 1;
  }
  return keys;
}

/** Keys a line holds more than once. */
export function repeatedKeys(line: string): string[] {
  const keys = topLevelKeys(line);
  return [...new Set(keys.filter((k, i) => keys.indexOf(k) !== i))];
}

/** A pino logger at debug level whose lines are kept, raw, in `lines` (shared by several loggers if given). */
export function capturingLogger(
  base: Record<string, unknown> = {},
  lines: string[] = [],
): { log: Logger; lines: string[] } {
  let rest = "";
  const sink = new Writable({
    write(chunk, _enc, done) {
      const text = rest + String(chunk);
      const parts = text.split("\n");
      rest = parts.pop() ?? "";
      lines.push(...parts.filter((l) => l !== ""));
      done();
    },
  });
  return { log: pino({ level: "debug", base }, sink), lines };
}
