/** Go duration strings as Flux and Argo CD specs carry them ("10m", "1m30s", "500ms", "1h"). */
const UNITS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/** Milliseconds, or undefined when the text is empty or not a duration. */
export function parseDuration(text: string | undefined): number | undefined {
  if (!text) return undefined;
  const re = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/gy;
  let total = 0;
  let matched = 0;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    total += Number(m[1]) * (UNITS[m[2] as string] as number);
    matched = re.lastIndex;
  }
  if (matched !== text.length || matched === 0) return undefined;
  return total;
}

/** A duration the way Go prints time.Duration (e.g. "2.8s", "340ms", "1m2.5s"). */
export function formatDuration(ms: number): string {
  if (ms <= 0) return "0s";
  if (ms < 1000) return `${trim(ms)}ms`;
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor((ms % 3_600_000) / 60_000);
  const s = (ms % 60_000) / 1000;
  return `${h ? `${h}h` : ""}${h || m ? `${m}m` : ""}${trim(s)}s`;
}

const trim = (n: number) => String(Number(n.toFixed(6)));
