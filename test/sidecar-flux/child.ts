/**
 * A sidecar process for the restart test: carries out one attempt (APPLYGATE_ATTEMPT, JSON) with
 * the Flux executor against the API server in APPLYGATE_SERVER / APPLYGATE_TOKEN, printing each
 * phase as a JSON line, so the test can kill it mid-apply.
 */

import { Kube } from "../../queue/kube/index.js";
import { silentLogger } from "../../queue/log.js";
import { memoryEvents } from "../../sidecar/events.js";
import { createApplierKind } from "../../sidecar/flux/index.js";
import { Following } from "../../sidecar/following.js";
import { memoryReporter } from "../../sidecar/reporter.js";
import { makeKubeConfig } from "../cluster/kubeconfig.js";
import { unrecordedChecks } from "../support/safety-checks.js";

const kc = makeKubeConfig({
  server: process.env.APPLYGATE_SERVER!,
  user: "admin",
  token: process.env.APPLYGATE_TOKEN!,
});
const kube = new Kube(kc);
const kind = createApplierKind({
  kind: "flux",
  kube,
  log: silentLogger(),
  events: memoryEvents(),
  following: new Following(),
  reporter: memoryReporter(),
  now: () => new Date(),
  checks: unrecordedChecks(kube),
  options: { pollMs: 50 },
});
const attempt = JSON.parse(process.env.APPLYGATE_ATTEMPT!);
await kind.executor.execute(
  attempt,
  async (phase, extra) => {
    process.stdout.write(`${JSON.stringify({ phase, ...extra })}\n`);
  },
  new AbortController().signal,
);
process.exit(0);
