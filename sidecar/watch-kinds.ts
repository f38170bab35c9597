/** The kinds a window observer watches for its applier's writes (`--watch-kinds`). */

export interface WatchedKind {
  apiVersion: string;
  kind: string;
}

/**
 * Not Secrets: a watch keeps every object of its kind in the cluster in memory, and clusters hold
 * many large Secrets (Helm keeps each release in one). Add `v1/Secret` with --watch-kinds when
 * Applications apply Secrets whose writes must be told from edits, and size the limit for it.
 */
export const DEFAULT_WATCHED_KINDS: WatchedKind[] = [
  { apiVersion: "v1", kind: "ConfigMap" },
  { apiVersion: "v1", kind: "Service" },
  { apiVersion: "apps/v1", kind: "Deployment" },
];

/** `--watch-kinds`: `apiVersion/Kind` items separated by commas (`v1/ConfigMap,apps/v1/Deployment`), or `none`. */
export function parseWatchKinds(raw: string): WatchedKind[] {
  if (raw.trim() === "none") return [];
  return raw.split(",").map((item) => {
    const t = item.trim();
    const slash = t.lastIndexOf("/");
    const apiVersion = t.slice(0, slash);
    const kind = t.slice(slash + 1);
    if (
      slash <= 0 ||
      !/^[A-Z][A-Za-z0-9]*$/.test(kind) ||
      !/^([a-z0-9.-]+\/)?v[0-9][a-z0-9]*$/.test(apiVersion)
    )
      throw new Error(
        `expected apiVersion/Kind items like v1/ConfigMap or apps/v1/Deployment, or none; got "${t}"`,
      );
    return { apiVersion, kind };
  });
}
