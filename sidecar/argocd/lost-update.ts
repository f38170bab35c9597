/**
 * The update that starts a sync got no answer: it may or may not have landed. Our token in
 * `operation` or the operation state means it landed; neither means not made yet, and a write at
 * the version the update was made from then makes sure it never lands (a conflict on that write
 * reads again). Read and written on the API server, retried after `pollMs` until it is decided.
 */
import { apiFailure, isConflict, type KObject, type Kube } from "../../queue/kube/index.js";
import type { Logger } from "../../queue/log.js";
import { sleepUnlessAborted } from "../sleep.js";
import { APPLICATION } from "./application.js";
import { refreshPatch, syncProgress } from "./sync.js";

export type LostUpdate = "Landed" | "Fenced" | "Deleted" | "Aborted";

export async function afterLostUpdate(
  kube: Kube,
  c: { token: string; app: { namespace: string; name: string }; signal: AbortSignal; log: Logger },
  readVersion: string,
  pollMs: number,
): Promise<LostUpdate> {
  for (;;) {
    if (c.signal.aborted) return "Aborted";
    let app: KObject | undefined;
    try {
      app = await kube.get(APPLICATION, c.app.namespace, c.app.name);
    } catch (err) {
      c.log.warn({ err: apiFailure(err).message }, "cannot read the KObject; retrying");
      await sleepUnlessAborted(pollMs, c.signal);
      continue;
    }
    if (!app) return "Deleted";
    if (syncProgress(app, c.token).stage !== "Absent") return "Landed";
    // Moved on without our token: an update made from readVersion is refused from now on.
    readVersion = app.metadata.resourceVersion ?? "";
    try {
      await kube.mergePatch(APPLICATION, c.app.namespace, c.app.name, refreshPatch(), {
        resourceVersion: readVersion,
      });
    } catch (err) {
      if (isConflict(err)) continue;
      c.log.warn({ err: apiFailure(err).message }, "cannot fence the lost update; retrying");
      await sleepUnlessAborted(pollMs, c.signal);
      continue;
    }
    return "Fenced";
  }
}
