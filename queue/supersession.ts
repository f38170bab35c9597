/**
 * When a newer tip supersedes an operation (pure). An operation still running, or waiting for
 * the applier's own retry, for an older commit can only ever apply an older state; waiting it out
 * holds the newer commit for nothing (an Argo CD operation retrying a broken commit ran on for
 * 311 s). But ending an operation is final (Argo CD never retries a terminated one), so only
 * proof ends one: the operation's revision is a commit id, it is not the tip, and the clone
 * proves it a proper ancestor of the tip. A symbolic revision (a branch or tag can move), a
 * commit the clone does not hold, a descendant of the tip and a commit on another line (a
 * force-push, back to an older commit or elsewhere) are not superseded. The branch worker asks
 * this before it asks for an operation's end, and the Argo CD sidecar asks it again before it
 * terminates one (seed 002). Shared by both, so it lives beside the contract.
 */
import type { Ancestry } from "./contract.js";

export type { Ancestry };

/** Why an operation is not superseded. */
export type NotSupersededBecause =
  /** The operation names no revision. */
  | "NoRevision"
  /** Its revision is not a commit id: a branch, a tag, `HEAD` (each can move). */
  | "Symbolic"
  /** There is no tip, or it is not a commit id. */
  | "NoTip"
  /** Its revision is the tip (a full or abbreviated id of it). */
  | "SameCommit"
  /** The clone cannot tell: a commit it does not hold, or an abbreviation naming several. */
  | "Unknown"
  /** A descendant of the tip, or a commit on another line: the tip went back or elsewhere. */
  | "NotAncestor";

export type SupersessionVerdict =
  | { verdict: "superseded" }
  | { verdict: "not-superseded"; why: NotSupersededBecause }
  /** The revision is a commit id that is not the tip: ask the clone, then judge again with its answer. */
  | { verdict: "prove"; revision: string };

/** A full or abbreviated commit id, as Git accepts one (7 to 40 hex digits, any case). */
const COMMIT_ID = /^[0-9a-f]{7,40}$/;
const FULL_ID = /^[0-9a-f]{40}$/;

/**
 * Whether `tip` supersedes an operation for `revision`, given what the clone answered of it
 * (`ancestry`; absent: not asked yet).
 */
export function judgeSupersession(
  revision: string | undefined,
  tip: string | null | undefined,
  ancestry?: Ancestry,
): SupersessionVerdict {
  const rev = (revision ?? "").trim().toLowerCase();
  if (rev === "") return { verdict: "not-superseded", why: "NoRevision" };
  if (!COMMIT_ID.test(rev)) return { verdict: "not-superseded", why: "Symbolic" };
  const head = (tip ?? "").trim().toLowerCase();
  if (!FULL_ID.test(head)) return { verdict: "not-superseded", why: "NoTip" };
  if (head.startsWith(rev)) return { verdict: "not-superseded", why: "SameCommit" };
  if (ancestry === undefined) return { verdict: "prove", revision: rev };
  if (ancestry === "unknown") return { verdict: "not-superseded", why: "Unknown" };
  if (ancestry === "not-ancestor") return { verdict: "not-superseded", why: "NotAncestor" };
  return { verdict: "superseded" };
}
