import type { SupersededNotice } from "../../queue/contract.js";
import { StatusReason } from "../../queue/crds/reasons.js";
import { errorMessage } from "../../queue/errors.js";
import { apiFailure, isConflict, isForbidden, type KObject, type Kube } from "../../queue/kube/index.js";
import type { Logger } from "../../queue/log.js";
import type { EventRecorder } from "../events.js";
import type { ClaimLocator } from "../operation-record.js";
import type { SupersessionSource } from "../supersessions.js";
import { APPLICATION } from "./application.js";
import { type Ancestry, decideStale, terminatePatch } from "./stale.js";
import type { ApplicationWatch } from "./watch.js";

/** What ending an operation needs of the executor's context for it. */
export interface OperationOf {
  token: string;
  claim: ClaimLocator;
  app: { namespace: string; name: string };
  branchKey: string;
  log: Logger;
  /** The branch worker found it superseded (the notice, handed in or read back). */
  superseded?: SupersededNotice;
  /** Terminated by this process as superseded, by this tip: its end is Superseded. */
  terminated?: string;
}

export interface StaleOperationsDeps {
  kube: Kube;
  events: EventRecorder;
  applications: Pick<ApplicationWatch, "read">;
  /** Answers ancestry from the branch worker's clone; without it no operation is ever terminated. */
  ancestry?: Ancestry;
  /** The tip the branch worker records; none: no superseded operation is ended. */
  supersessions?: Pick<SupersessionSource, "tip">;
}

export class StaleOperations {
  constructor(private readonly d: StaleOperationsDeps) {}

  /**
   * Ends an operation the branch worker found superseded, on proof (seed 002): read from the API
   * server, it is still ours and running, and its revision is a proven ancestor of the tip the
   * worker records now (a force-push back since the notice leaves it alone). The terminate is
   * guarded by the resourceVersion of that read. `retry`: a conflict or a failed write, tried
   * again on the next look; `left`: not proven (or not allowed), it runs to its end.
   */
  async endSuperseded(c: OperationOf): Promise<"terminated" | "retry" | "left"> {
    const notice = c.superseded as SupersededNotice;
    let tip: string | undefined;
    try {
      tip = await this.d.supersessions?.tip(c.branchKey);
    } catch (err) {
      c.log.warn({ err: errorMessage(err) }, "cannot read the tip to prove the supersession; trying again");
      return "retry";
    }
    const leave = (why: string) => {
      c.log.info(
        { tip: tip ?? null, notice: notice.tip, why },
        "superseded operation left to run: not proven",
      );
      delete c.superseded;
      return "left" as const;
    };
    if (!tip) return leave("NoTip");
    // The worker proved the notice's commit an ancestor of the notice's tip in its clone. While
    // that tip is still the one it records, its proof stands (asking this process's clone would
    // fetch the same commits again); a tip that moved since is proven here, against the tip now.
    const proven = tip === notice.tip ? { revision: notice.commit, commit: notice.tip } : undefined;
    const r = await this.terminateIfStale(c, {
      commit: tip,
      only: c.token,
      fatalOnForbidden: false,
      ...(proven ? { proven } : {}),
    });
    if (r.retry) return "retry";
    if (!r.terminated) return leave(r.left ?? "NotProven");
    c.terminated = tip;
    c.log.info({ tip, revision: r.terminated }, "terminated the operation: a newer tip supersedes it");
    return "terminated";
  }

  /**
   * Seed 002: terminate the set operation only when it is ours, running, and its revision is a
   * proven ancestor of `commit` (the commit we must sync, or the tip that supersedes it). A
   * conflict or a failure is tried again after a poll interval (`retry`); Forbidden is fatal when
   * `fatalOnForbidden` (returned as `fatal`), else the operation is left. Judged first on `seen`
   * (the cache's copy when `cached`): one that could be terminated is judged again, and proven, on
   * a read from the API server, and the terminate is guarded by that read's version. `only`: the
   * token the operation must carry.
   */
  async terminateIfStale(
    c: OperationOf,
    o: {
      commit: string;
      seen?: KObject;
      cached?: boolean;
      only?: string;
      fatalOnForbidden: boolean;
      /** A proof already made: `revision` is a proper ancestor of `commit` (both full ids). */
      proven?: { revision: string; commit: string };
    },
  ): Promise<{ fatal?: string; retry?: boolean; terminated?: string; left?: string }> {
    if (o.seen) {
      const first = decideStale(o.seen, o.commit);
      if (first.action === "leave") return { left: first.why };
    }
    let app = o.seen;
    if (!app || o.cached) {
      const fresh = await this.d.applications.read(c.app).catch((err: unknown) => {
        c.log.warn({ err: apiFailure(err).message }, "cannot read the KObject; trying on the next poll");
        return null;
      });
      if (fresh === null) return { retry: true };
      if (!fresh) return { left: "ApplicationGone" };
      app = fresh;
    }
    let d = decideStale(app, o.commit);
    if (d.action === "prove" && o.proven?.commit === o.commit && o.proven.revision === d.revision) {
      d = decideStale(app, o.commit, "ancestor");
    } else if (d.action === "prove") {
      const ancestry = this.d.ancestry;
      const answer = ancestry
        ? await ancestry(d.revision, o.commit, { application: app, claim: c.claim }).catch(
            () => "unknown" as const,
          )
        : "unknown";
      d = decideStale(app, o.commit, answer);
    }
    if (d.action !== "terminate") return { left: d.action === "leave" ? d.why : "NotProven" };
    if (o.only !== undefined && d.token !== o.only) return { left: "Foreign" };
    try {
      await this.d.kube.mergePatch(APPLICATION, c.app.namespace, c.app.name, terminatePatch(), {
        resourceVersion: d.resourceVersion,
      });
    } catch (err) {
      if (isConflict(err)) {
        c.log.info({ stale: d.token }, "terminating a stale operation conflicted; trying on the next poll");
        return { retry: true };
      }
      if (isForbidden(err)) {
        const message = `terminating stale operation ${d.token} is forbidden: ${apiFailure(err).message}`;
        if (o.fatalOnForbidden) return { fatal: message };
        c.log.warn({ stale: d.token }, message);
        return { left: StatusReason.Forbidden };
      }
      c.log.warn(
        { err: apiFailure(err).message },
        "terminating a stale operation failed; trying on the next poll",
      );
      return { retry: true };
    }
    c.log.info({ stale: d.token, revision: d.revision }, "terminated a stale operation");
    await this.d.events.emit({
      type: "Normal",
      reason: StatusReason.StaleOperationTerminated,
      action: "Terminate",
      note: `terminated applygate operation ${d.token} for ${d.revision}, an ancestor of ${o.commit}`,
      regarding: {
        apiVersion: "argoproj.io/v1alpha1",
        kind: "Application",
        namespace: c.app.namespace,
        name: c.app.name,
        ...(app.metadata.uid ? { uid: app.metadata.uid } : {}),
      },
    });
    return { terminated: d.revision };
  }
}
