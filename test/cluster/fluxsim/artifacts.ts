/**
 * The artifact storage of source-controller, in memory: each stored artifact is the file tree of
 * one commit, found by its path. Like upstream's garbage collection, only the newest two per
 * source are kept.
 */
import { createHash } from "node:crypto";

export interface Artifact {
  digest: string;
  path: string;
  url: string;
  revision: string;
  lastUpdateTime: string;
  size: number;
}

export interface StoredArtifact {
  artifact: Artifact;
  files: ReadonlyMap<string, string>;
}

const KEEP = 2;

export class ArtifactStore {
  readonly #byPath = new Map<string, StoredArtifact>();
  readonly #bySource = new Map<string, string[]>();

  /** Digest of a file tree: sha256 over sorted paths and contents. */
  static digestOf(files: ReadonlyMap<string, string>): { digest: string; size: number } {
    const h = createHash("sha256");
    let size = 0;
    for (const p of [...files.keys()].sort()) {
      const c = files.get(p) as string;
      h.update(`${p}\0${c.length}\0`).update(c);
      size += Buffer.byteLength(c);
    }
    return { digest: `sha256:${h.digest("hex")}`, size };
  }

  put(source: string, artifact: Artifact, files: ReadonlyMap<string, string>): void {
    this.#byPath.set(artifact.path, { artifact, files });
    const paths = (this.#bySource.get(source) ?? []).filter((p) => p !== artifact.path);
    paths.push(artifact.path);
    while (paths.length > KEEP) this.#byPath.delete(paths.shift() as string);
    this.#bySource.set(source, paths);
  }

  /** The files of an artifact, when the path is stored and its digest still matches. */
  get(artifact: { path?: string; digest?: string } | undefined): StoredArtifact | undefined {
    if (!artifact?.path) return undefined;
    const s = this.#byPath.get(artifact.path);
    return s && s.artifact.digest === artifact.digest ? s : undefined;
  }

  dropSource(source: string): void {
    for (const p of this.#bySource.get(source) ?? []) this.#byPath.delete(p);
    this.#bySource.delete(source);
  }
}
