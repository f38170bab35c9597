/**
 * `npm run bench -- webhook`: the webhook applier as deployed (its ServiceAccount, the simulated
 * API server, real Redis), attempt queued → operation Succeeded recorded on the claim, for an
 * endpoint that answers at once: mode response (the answer ends it) and mode callback (a report
 * queued for the sidecar ends it, as the gateway queues one). Medians of a few runs.
 */
import { callbackKeys } from "../../queue/webhook-callback.js";
import { startWebhookWorld, until } from "../sidecar-webhook/harness.js";
import type { Figure } from "./figure.js";

const RUNS = 11;

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? Number.NaN;
};

export async function run(): Promise<Figure[]> {
  const w = await startWebhookWorld();
  try {
    await w.createClaim("bench-response", { url: `${w.endpoint.url}/r` });
    await w.createClaim("bench-callback", { url: `${w.endpoint.url}/c`, mode: "callback" });
    const measure = async (claim: string, callback: boolean) => {
      const out: number[] = [];
      for (let i = 0; i < RUNS; i++) {
        w.endpoint.handle((r, res) => {
          res.statusCode = callback ? 202 : 200;
          res.end("ok");
          if (callback)
            void w.redis.client.rpush(
              callbackKeys(w.redis.prefix, String(r.body.token)).reports,
              JSON.stringify({ phase: "Succeeded", receivedAt: new Date().toISOString() }),
            );
        });
        // The harness waits for the claim's last operation to be released before it queues.
        await until(() => w.sidecar.following.forClaim(`team-a/${claim}`) === undefined, "released");
        const t0 = performance.now();
        const a = await w.send(claim);
        await w.reaches(claim, "Succeeded", a.token);
        out.push(performance.now() - t0);
      }
      return out;
    };
    const response = await measure("bench-response", false);
    const callback = await measure("bench-callback", true);
    return [
      {
        bench: "webhook send → Succeeded (mode response)",
        value: Math.round(median(response)),
        unit: "ms",
        note: `median of ${RUNS}; attempt queued to the completion on the claim's status`,
      },
      {
        bench: "webhook send → Succeeded (mode callback)",
        value: Math.round(median(callback)),
        unit: "ms",
        note: `median of ${RUNS}; report read by the 20 ms poll of the test settings (250 ms by default)`,
      },
    ];
  } finally {
    await w.stop();
  }
}
