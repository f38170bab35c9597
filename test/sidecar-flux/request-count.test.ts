/**
 * What one apply costs the API server: the requests the Flux executor makes for one operation,
 * from the attempt to Succeeded (recheck, record, resume, follow, suspend again, complete),
 * counted by the simulated API server for a user of the executor's own, the standing recheck
 * included. Counts are deterministic where times are not, so the bound is what the executor
 * reaches today: a change that adds a request fails here, and must say why in docs/flux.md.
 */
import { describe, expect, it } from "vitest";
import { Kube } from "../../queue/kube/index.js";
import { recheckStanding } from "../../sidecar/standing.js";
import { fileWorld } from "../support/file-world.js";
import { adopted, configMap, startWorld } from "./harness.js";

/**
 * One apply: the claim read before the record; the window's list and watch of the inventory's
 * kind; the record; the standing recheck (the claim and the GitTarget, uncached); the resume; the
 * Running, Settling and completion writes; the suspend. The Kustomization and its GitRepository
 * are read from the watch's cache, and each claim write starts from the answer to the one before.
 */
const REQUESTS_PER_APPLY = 11;

const world = fileWorld(() => startWorld());

describe("the API requests of one Flux apply", () => {
  for (const objects of [1, 50]) {
    it(`${objects} object(s): at most ${REQUESTS_PER_APPLY}, none a read of the Kustomization or its source`, async () => {
      const user = `count-flux-${objects}`;
      world.api.addUser(user, `token-${user}`, "all");
      const kube = new Kube(world.api.kubeConfig(user));
      const files = (v: string) =>
        Object.fromEntries(
          Array.from({ length: objects }, (_, i) => [`apps/cm-${i}.yaml`, configMap(`cm-${i}`, v)]),
        );
      try {
        const s = await adopted(world, {
          objects,
          executorKube: kube,
          // Every read while following is woken by a watch event: no poll re-read within an apply.
          options: { pollMs: 60_000 },
          checks: { standing: (a) => recheckStanding(kube, a) },
        });
        // The first apply of a client also asks discovery once for the inventory's kind: not counted.
        for (let i = 0; i < 3; i++) {
          const commit = await s.push(files(`c${i}`));
          // The artifact holds the commit beforehand: the source fetch is the same as without applygate.
          await s.fetch(`fetch-${i}`, commit);
          const trace = world.api.traceRequests(user);
          const r = await s.run(s.attempt(commit));
          trace.stop();
          expect(r.last.phase).toBe("Succeeded");
          if (i === 0) continue;
          const why = trace.requests.join("\n");
          expect(trace.requests.length, why).toBeLessThanOrEqual(REQUESTS_PER_APPLY);
          expect(
            trace.requests.filter((q) => /^GET .*\/(kustomizations|gitrepositories)\//.test(q)),
            why,
          ).toEqual([]);
          // The resume and the suspend, each one server-side apply.
          expect(trace.requests.filter((q) => q.startsWith("PATCH(apply)")).length, why).toBe(2);
        }
      } finally {
        await kube.close();
      }
    });
  }
});
