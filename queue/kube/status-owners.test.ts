import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  argoCDClaimStatus,
  fluxClaimStatus,
  gitProviderStatus,
  gitTargetStatus,
  watchRuleStatus,
  webhookClaimStatus,
} from "../crds/index.js";
import {
  type OwnedStatus,
  ownedFields,
  ownedStatus,
  ownerOf,
  STATUS_OWNERS,
  StatusFieldNotOwned,
  type StatusObject,
  statusFieldManager,
} from "./status-owners.js";

const root = new URL("../../", import.meta.url);
const schemas: Record<StatusObject, string[][]> = {
  claim: [
    Object.keys(fluxClaimStatus.shape),
    Object.keys(argoCDClaimStatus.shape),
    Object.keys(webhookClaimStatus.shape),
  ],
  gitTarget: [Object.keys(gitTargetStatus.shape)],
  gitProvider: [Object.keys(gitProviderStatus.shape)],
  watchRule: [Object.keys(watchRuleStatus.shape)],
};
const objects = Object.keys(STATUS_OWNERS) as StatusObject[];
const rules = objects.flatMap((object) =>
  Object.keys(STATUS_OWNERS[object]).map((party) => ({ object, party })),
);

describe("who writes which status field", () => {
  it.each(objects)("every field of a %s's status has exactly one writing party", (object) => {
    for (const fields of schemas[object]) {
      const owners = fields.map((f) => [
        f,
        rules.filter((r) => r.object === object && ownedFields(object, r.party as never).includes(f)).length,
      ]);
      expect(owners.filter(([, n]) => n !== 1)).toEqual([]);
    }
    // Every field the table names is a field of the object's status (of one kind at least: a
    // WebhookClaim has no previousSuspendState).
    const named = rules
      .filter((r) => r.object === object)
      .flatMap((r) => ownedFields(object, r.party as never));
    const all = schemas[object].flat();
    expect(named.filter((f) => !all.includes(f))).toEqual([]);
  });

  it.each(rules)(
    "$party writes its own fields of a $object's status, and no other party's",
    ({ object, party }) => {
      const own = ownedFields(object, party as never);
      const patch = Object.fromEntries(own.map((f) => [f, null]));
      expect(ownedStatus(object, party as never, patch as never)).toBe(patch);
      const others = rules.filter((r) => r.object === object && r.party !== party);
      for (const other of others)
        for (const field of ownedFields(object, other.party as never)) {
          expect(() => ownedStatus(object, party as never, { [field]: 1 } as never)).toThrow(
            StatusFieldNotOwned,
          );
          expect(() => ownedStatus(object, party as never, { [field]: 1 } as never)).toThrow(
            `${party} may not write status.${field} of a ${object} (${ownerOf(object, field)} writes it)`,
          );
        }
      expect(() => ownedStatus(object, party as never, { somethingElse: 1 } as never)).toThrow(
        "(no party writes it)",
      );
      expect(statusFieldManager(party)).toBe(`applygate-${party}`);
    },
  );

  it("a party owning some condition types writes the list only with every other type as read", () => {
    const current = {
      status: {
        conditions: [
          { type: "Ready", status: "True" },
          { type: "ApplyAllowed", status: "True" },
        ],
      },
    };
    const mine = {
      conditions: [
        { type: "Ready", status: "True" },
        { type: "ApplyAllowed", status: "False", reason: "OutsideChangeWindow" },
      ],
    };
    expect(ownedStatus("claim", "branch-worker", mine, current)).toBe(mine);
    const touched = { conditions: [{ type: "Ready", status: "False" }, mine.conditions[1]] };
    expect(() => ownedStatus("claim", "branch-worker", touched, current)).toThrow(StatusFieldNotOwned);
    const dropped = { conditions: [mine.conditions[1]] };
    expect(() => ownedStatus("claim", "branch-worker", dropped, current)).toThrow(StatusFieldNotOwned);
    // Without the object it was made from, the list cannot be checked: refused.
    expect(() => ownedStatus("claim", "branch-worker", mine)).toThrow(StatusFieldNotOwned);
    expect(() => ownedStatus("claim", "operation-record", mine as never, current)).toThrow(
      StatusFieldNotOwned,
    );
  });

  it("the compiler refuses another party's field in a patch written out", () => {
    // Each line below fails to compile without its directive: `tsc --noEmit` proves the refusal.
    // @ts-expect-error the branch worker does not write the operation
    const a: OwnedStatus<"claim", "branch-worker"> = { operation: {} };
    // @ts-expect-error the operation record does not write conditions
    const b: OwnedStatus<"claim", "operation-record"> = { conditions: [] };
    // @ts-expect-error the claim controller does not write repairPending
    const c: OwnedStatus<"claim", "claim-controller"> = { repairPending: true };
    // @ts-expect-error the gateway writes a GitProvider's status, not a GitTarget's publication
    const d: OwnedStatus<"gitProvider", "gateway"> = { publication: {} };
    expect([a, b, c, d]).toHaveLength(4);
  });

  it("every status write in product code goes through the layer's writers", () => {
    const files = execFileSync("git", ["ls-files", "queue/**.ts", "sidecar/**.ts", "gateway/**.ts"], {
      cwd: root,
      encoding: "utf8",
    })
      .split("\n")
      .filter((f) => f && !f.endsWith(".test.ts") && !f.endsWith("testing.ts"))
      .filter((f) => f !== "queue/kube/client.ts" && f !== "queue/kube/status-owners.ts");
    const unguarded: string[] = [];
    for (const file of files) {
      const lines = readFileSync(new URL(file, root), "utf8").split("\n");
      lines.forEach((line, i) => {
        if (/\.patchStatus\(|\.mergePatch\([^)]*status: true|patchNamespacedCustomObjectStatus\(/.test(line))
          unguarded.push(`${file}:${i + 1}`);
      });
    }
    expect(unguarded).toEqual([]);
  });
});
