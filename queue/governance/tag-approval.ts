/**
 * Signature approval by tag (modes `Tag` and `TagAndHEAD`), pure: which foreign commits a signed
 * annotated tag approves.
 *
 * The rule is the release's: a release manager tags a commit of the branch with a signed
 * annotated tag, and the tag approves that commit and every foreign commit under it on the
 * first-parent line since the last applied commit (what the release brings), as a signed merge
 * commit approves what it merges. A commit above every trusted tag (pushed after the release was
 * tagged) is approved by none, so the tip waits until a tag covers it: the tip is approved only
 * when a trusted tag points at its newest foreign commit (or at one of the worker's own commits
 * above it). A commit is covered by the nearest trusted tag at or above it, so the audit names
 * the release that brought it. Lightweight tags carry no signature and approve nothing; tags on
 * commits off the first-parent line (inside a merged branch) are not read.
 *
 * `TagAndHEAD` asks both: each foreign commit's own signature (as mode `HEAD`) and a trusted tag
 * covering it.
 */
import { StatusReason } from "../crds/reasons.js";
import type { SignatureRead } from "./model.js";

/** A tag of the repository pointing at a commit of the line, as the shell read it. */
export interface TagRead {
  /** The tag's name, without `refs/tags/`. */
  name: string;
  /** The commit it points at (peeled). */
  commit: string;
  /** False for a lightweight tag (a ref straight to the commit, no tag object, no signature). */
  annotated: boolean;
  /** The tag object's signature checked against the trusted keys (annotated tags). */
  verdict?: SignatureRead;
}

/** Whether a tag name matches a pattern: `*` any run of characters, `?` one; none matches all. */
export function tagMatches(name: string, pattern: string | undefined): boolean {
  if (pattern === undefined || pattern === "") return true;
  const re = pattern
    .replace(/[.+^${}()|[\]\\]/g, "\\$&")
    .replace(/\*/g, ".*")
    .replace(/\?/g, ".");
  return new RegExp(`^${re}$`).test(name);
}

/** Why a tag does not approve: its verdict, or that it is lightweight. */
function tagProblem(t: TagRead): { ok: false; reason: string; message: string } {
  if (!t.annotated)
    return {
      ok: false,
      reason: StatusReason.CommitUnsigned,
      message: `tag ${t.name} is a lightweight tag: it carries no signature`,
    };
  const v = t.verdict;
  if (!v) return { ok: false, reason: StatusReason.SignatureInvalid, message: `tag ${t.name} was not read` };
  if (v.ok) return { ok: false, reason: StatusReason.SignatureInvalid, message: `tag ${t.name}` };
  return { ok: false, reason: v.reason, message: `tag ${t.name}: ${v.message}` };
}

const byName = (a: TagRead, b: TagRead) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

/**
 * Each foreign commit's signature read in a tag mode. `line` is the first-parent walk from the tip
 * back to the last applied commit, newest first, the worker's own commits it passed included;
 * `foreign` the commits of it that need approval; `heads` their own signatures (`TagAndHEAD`).
 */
export function tagSignatures(
  mode: "Tag" | "TagAndHEAD",
  line: readonly string[],
  foreign: readonly string[],
  tags: readonly TagRead[],
  pattern?: string,
  heads?: Readonly<Record<string, SignatureRead>>,
): Record<string, SignatureRead> {
  const at = new Map<string, TagRead[]>();
  for (const t of tags) {
    if (!tagMatches(t.name, pattern)) continue;
    at.set(t.commit, [...(at.get(t.commit) ?? []), t]);
  }
  const wanted = new Set(foreign);
  const out: Record<string, SignatureRead> = {};
  let trusted: TagRead | undefined;
  let other: TagRead | undefined;
  for (const c of line) {
    const here = [...(at.get(c) ?? [])].sort(byName);
    const good = here.find((t) => t.annotated && t.verdict?.ok);
    if (good) trusted = good;
    // Why none approves: the nearest tag above, an annotated one before a lightweight one.
    else if (here[0]) other = here.find((t) => t.annotated) ?? here[0];
    if (!wanted.has(c)) continue;
    const head = heads?.[c];
    if (mode === "TagAndHEAD" && !head?.ok) {
      out[c] = head ?? {
        ok: false,
        reason: StatusReason.CommitUnsigned,
        message: "the commit is not signed",
      };
      continue;
    }
    const v = trusted?.verdict;
    if (!trusted || !v?.ok) {
      const none = pattern ? `no annotated tag matching ${JSON.stringify(pattern)}` : "no annotated tag";
      out[c] = other
        ? tagProblem(other)
        : {
            ok: false,
            reason: StatusReason.CommitNotTagged,
            message: `${none} signed by a trusted key points at this commit or at one above it on the branch`,
          };
      continue;
    }
    const tag = { name: trusted.name, key: v.key, ...(v.signer ? { signer: v.signer } : {}) };
    out[c] =
      mode === "TagAndHEAD" && head?.ok
        ? { ok: true, key: head.key, ...(head.signer ? { signer: head.signer } : {}), tag }
        : { ok: true, key: v.key, ...(v.signer ? { signer: v.signer } : {}), tag };
  }
  return out;
}
