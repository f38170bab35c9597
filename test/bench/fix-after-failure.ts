/**
 * Fix → applied: a commit that makes the apply fail, then a fix pushed on top, on the playground's
 * assembly at the playground's timers, for each applier kind (Flux, Argo CD, the webhook
 * deployer) and each moment the fix can come (while the failing operation runs, during the
 * backoff, once the failure settled). One figure per kind and moment: ms from the fix's push to
 * its apply reported Succeeded, against the 5 s goal. Set FIX_KINDS=flux,argocd to run fewer.
 */
import { DEFAULT_KNOBS } from "../cluster/fluxsim/index.js";
import { settled } from "../playground/actors.js";
import { PLAYGROUND_TIMERS, startAssembly } from "../playground/assembly.js";
import { FIX_TIMINGS, fixAfterFailure } from "../playground/fix-after-failure.js";
import { observeProgress } from "../playground/progress.js";
import type { Figure } from "./figure.js";

const GOAL_MS = 5_000;
const KINDS = ["flux", "argocd", "webhook"] as const;
const WHEN = {
  "during-operation": "while an operation failing on",
  "during-backoff": "during the backoff after",
  "after-settled": "once the claim said it retries",
} as const;

export async function run(): Promise<Figure[]> {
  const wanted = (process.env.FIX_KINDS ?? KINDS.join(",")).split(",");
  const redisUrl = process.env.TEST_REDIS_URL;
  const a = await startAssembly({
    ...(redisUrl ? { redisUrl } : {}),
    timers: { ...PLAYGROUND_TIMERS, flux: { ...DEFAULT_KNOBS } },
  });
  const p = await observeProgress({ redisUrl: a.redis.url, prefix: a.prefix, kinds: [...KINDS] });
  const figures: Figure[] = [];
  try {
    await settled(a, 60_000, KINDS);
    for (const app of KINDS.filter((k) => wanted.includes(k))) {
      for (const timing of FIX_TIMINGS) {
        const r = await fixAfterFailure(a, p, app, timing, 10 * 60_000);
        const end = r.brokenReports.at(-1)?.report.phase ?? "none";
        figures.push({
          bench: `fix-after-failure.${app}.${timing}`,
          value: r.ms,
          unit: "ms",
          baseline: GOAL_MS,
          ratio: Number((r.ms / GOAL_MS).toFixed(3)),
          note: `fix ${r.fix.sha.slice(0, 7)} pushed ${WHEN[timing]} ${r.broken.sha.slice(0, 7)} (its last operation ended ${end}) → applied; baseline is the 5 s goal`,
        });
      }
    }
  } finally {
    await p.stop();
    await a.stop();
  }
  return figures;
}
