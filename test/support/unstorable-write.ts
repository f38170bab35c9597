/**
 * A write no door would accept: a ClusterRole named `.git:x`, which Git cannot store. Put straight
 * into a branch's inbox (acceptWrite, past the gateway), it shows a write the worker must settle as
 * refused without blocking the branch.
 */
import { randomUUID } from "node:crypto";
import type { AcceptedWrite } from "../../queue/contract.js";

export function unstorableWrite(
  to: Pick<AcceptedWrite, "target" | "branchKey" | "path" | "author">,
): AcceptedWrite {
  return {
    id: `w-${randomUUID()}`,
    ...to,
    acceptedAt: new Date().toISOString(),
    save: true,
    changes: [
      {
        op: "upsert",
        object: {
          apiVersion: "rbac.authorization.k8s.io/v1",
          kind: "ClusterRole",
          metadata: { name: ".git:x" },
        },
      },
    ],
  };
}
