// Pure reading of go.mod text and the replace lines our tool modules derive from upstream's.
// A consumer of a Go module ignores that module's own replace and godebug lines, so whatever
// upstream builds with has to be restated in our go.mod: these functions decide what to restate.

export interface Requirement {
  path: string;
  version: string;
}

export interface Replacement {
  path: string;
  /** Set when only one version of `path` is replaced. */
  version?: string;
  target: string;
  /** Set for a module target; absent for a local folder (`./api`). */
  targetVersion?: string;
}

export interface GoMod {
  module: string;
  go?: string;
  godebug: string[];
  requires: Requirement[];
  replaces: Replacement[];
  /** Packages named by `tool` directives. */
  tools: string[];
}

const stripComment = (line: string): string => {
  const at = line.indexOf("//");
  return (at < 0 ? line : line.slice(0, at)).trim();
};

const isLocalPath = (target: string): boolean =>
  target.startsWith("./") || target.startsWith("../") || target.startsWith("/");

export function parseReplacement(spec: string): Replacement {
  const [left, right] = spec.split("=>").map((side) => side.trim().split(/\s+/));
  if (!left?.[0] || !right?.[0] || left.length > 2 || right.length > 2) {
    throw new Error(`unreadable replace: ${spec}`);
  }
  const replacement: Replacement = { path: left[0], target: right[0] };
  if (left[1]) replacement.version = left[1];
  if (right[1]) replacement.targetVersion = right[1];
  else if (!isLocalPath(right[0])) throw new Error(`replace without a version: ${spec}`);
  return replacement;
}

/** Reads the directives we need; everything else (exclude, retract, toolchain) is ignored. */
export function parseGoMod(text: string): GoMod {
  const mod: GoMod = { module: "", godebug: [], requires: [], replaces: [], tools: [] };
  let block: string | undefined;
  const take = (directive: string, spec: string): void => {
    if (!spec) return;
    if (directive === "require") {
      const [path, version] = spec.split(/\s+/);
      if (!path || !version) throw new Error(`unreadable require: ${spec}`);
      mod.requires.push({ path, version });
    } else if (directive === "replace") {
      mod.replaces.push(parseReplacement(spec));
    } else if (directive === "godebug") {
      mod.godebug.push(spec);
    } else if (directive === "tool") {
      mod.tools.push(spec);
    }
  };
  for (const raw of text.split("\n")) {
    const line = stripComment(raw);
    if (!line) continue;
    if (block) {
      if (line === ")") block = undefined;
      else take(block, line);
      continue;
    }
    const open = /^(\w+)\s*\($/.exec(line);
    if (open) {
      block = open[1];
      continue;
    }
    const [directive, ...rest] = line.split(/\s+/);
    const spec = rest.join(" ");
    if (directive === "module") mod.module = spec;
    else if (directive === "go") mod.go = spec;
    else if (directive) take(directive, spec);
  }
  return mod;
}

/**
 * k8s.io/kubernetes requires each of its staging modules (k8s.io/api, k8s.io/client-go, …) at the
 * version v0.0.0, which exists nowhere: upstream points them at ./staging/src. Kubernetes vX.Y.Z
 * ships them as v0.Y.Z, so a consumer maps every one to that version.
 */
export function stagingReplacements(kubernetes: GoMod, kubernetesVersion: string): Replacement[] {
  const match = /^v1\.(\d+)\.(\d+)$/.exec(kubernetesVersion);
  if (!match) throw new Error(`not a k8s.io/kubernetes release: ${kubernetesVersion}`);
  const stagingVersion = `v0.${match[1]}.${match[2]}`;
  const staged = kubernetes.requires
    .filter((r) => r.path.startsWith("k8s.io/") && r.version === "v0.0.0")
    .map((r) => r.path);
  if (staged.length === 0) throw new Error("k8s.io/kubernetes requires no k8s.io/* module at v0.0.0");
  return [...new Set(staged)].sort().map((path) => ({ path, target: path, targetVersion: stagingVersion }));
}

export interface Upstream {
  module: string;
  mod: GoMod;
}

export interface Derived {
  replaces: Replacement[];
  /** Upstream replaces to a folder of its own repository: no consumer can follow them. */
  skipped: { from: string; replace: Replacement }[];
  godebug: string[];
}

const replaceKey = (r: Replacement): string => (r.version ? `${r.path}@${r.version}` : r.path);

/**
 * The replace lines a consumer restates: the staging block (when k8s.io/kubernetes is built or
 * depended on; it wins over any upstream's k8s.io/* line, so one k8s.io release is used), then
 * every other upstream replace to a published module version. Two upstreams that replace one
 * module differently are a conflict a person must settle, never a silent choice.
 */
export function deriveReplacements(
  upstreams: Upstream[],
  staging: Replacement[] = [],
  godebugFrom?: string,
): Derived {
  const chosen = new Map<string, { from: string; replace: Replacement }>();
  const skipped: Derived["skipped"] = [];
  for (const { module, mod } of upstreams) {
    for (const replace of mod.replaces) {
      // The staging block maps every k8s.io/* module to one release, whatever upstream says.
      if (staging.length > 0 && replace.path.startsWith("k8s.io/")) continue;
      if (!replace.targetVersion) {
        skipped.push({ from: module, replace });
        continue;
      }
      const key = replaceKey(replace);
      const earlier = chosen.get(key);
      if (
        earlier &&
        (earlier.replace.target !== replace.target || earlier.replace.targetVersion !== replace.targetVersion)
      ) {
        throw new Error(
          `${earlier.from} and ${module} replace ${key} differently: ` +
            `${earlier.replace.target} ${earlier.replace.targetVersion} vs ${replace.target} ${replace.targetVersion}`,
        );
      }
      chosen.set(key, { from: module, replace });
    }
  }
  const copied = [...chosen.values()].map((c) => c.replace).sort((a, b) => a.path.localeCompare(b.path));
  const godebugSource = upstreams.find((u) => u.module === godebugFrom);
  if (godebugFrom && !godebugSource) throw new Error(`godebug source ${godebugFrom} is not an upstream`);
  return { replaces: [...copied, ...staging], skipped, godebug: godebugSource?.mod.godebug ?? [] };
}

export const formatReplacement = (r: Replacement): string =>
  `${r.path}${r.version ? ` ${r.version}` : ""} => ${r.target}${r.targetVersion ? ` ${r.targetVersion}` : ""}`;

export const BEGIN = "// BEGIN generated by test/real/tools/sync-replaces.ts: do not edit by hand";
export const END = "// END generated";

/** The generated section of one of our go.mod files. */
export function renderGenerated(derived: Derived, sources: string[]): string {
  const lines = [BEGIN, `// from ${sources.join(", ")}`];
  for (const setting of derived.godebug) lines.push(`godebug ${setting}`);
  if (derived.replaces.length > 0) {
    lines.push("replace (");
    for (const r of derived.replaces) lines.push(`\t${formatReplacement(r)}`);
    lines.push(")");
  }
  lines.push(END);
  return lines.join("\n");
}

/** Puts the generated section in place of the previous one, or at the end. */
export function spliceGenerated(goMod: string, generated: string): string {
  const begin = goMod.indexOf(BEGIN);
  const end = goMod.indexOf(END);
  if (begin < 0 !== end < 0 || end < begin) throw new Error("go.mod has a broken generated section");
  if (begin < 0) return `${goMod.trimEnd()}\n\n${generated}\n`;
  return goMod.slice(0, begin) + generated + goMod.slice(end + END.length);
}
