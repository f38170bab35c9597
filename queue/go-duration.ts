/**
 * Durations as Go's time.ParseDuration reads them ("5s", "1m30s", "250ms", "1.5h"), which is how
 * Flux and Argo CD specs carry them. Argo CD's retry backoff also takes a bare integer as seconds
 * (`parseStringToDuration`): `bareSeconds` reads it so.
 */
const UNITS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  μs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/** Milliseconds, or undefined when the text is not a duration. */
export function parseGoDuration(
  text: string | undefined,
  o: { bareSeconds?: boolean } = {},
): number | undefined {
  const t = text ?? "";
  if (t === "") return undefined;
  if (o.bareSeconds && /^-?\d+$/.test(t)) return Number(t) * 1000;
  if (t === "0") return 0;
  const sign = t.startsWith("-") ? -1 : 1;
  const body = t.replace(/^[-+]/, "");
  const re = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/gy;
  let total = 0;
  let end = 0;
  for (let m = re.exec(body); m; m = re.exec(body)) {
    total += Number(m[1]) * (UNITS[m[2] as string] as number);
    end = re.lastIndex;
  }
  if (end === 0 || end !== body.length) return undefined;
  return sign * total;
}
