// The real components, one Go module of ours per tool set (test/real/tools/<set>/go.mod) so
// that Go's minimal version selection never mixes one set's dependency versions into another's.
// The versions live in those go.mod files; this table says what to build from each and how.

export interface Binary {
  /** File name in the bin folder. */
  name: string;
  /** The upstream `package main`. */
  pkg: string;
  /** Arguments that make it print its version (or, lacking one, its usage) and exit 0. */
  versionArgs: string[];
}

/** An -X setting of the linker; `{version}` etc. are filled in from our go.mod at build time. */
export interface VersionFlag {
  variable: string;
  value: string;
}

export interface ToolSet {
  /** Folder under test/real/tools/. */
  set: string;
  /** The upstream module whose version names the set (read from our go.mod's require). */
  main: string;
  /** Upstream modules whose replace lines our go.mod restates (test/real/tools/sync-replaces.ts). */
  replacesFrom: string[];
  /** Set when the staging modules of k8s.io/kubernetes must be mapped to its release. */
  staging?: boolean;
  /** Upstream module whose `godebug` line we copy. */
  godebugFrom?: string;
  binaries: Binary[];
  /** Symlinks to a binary that picks its role from its own name (Argo CD). */
  aliases?: Record<string, string>;
  ldflags?: VersionFlag[];
}

// Kubernetes' own build (hack/lib/version.sh) sets both packages; clients read client-go's.
const kubeVersionFlags: VersionFlag[] = [
  "k8s.io/component-base/version",
  "k8s.io/client-go/pkg/version",
].flatMap((pkg) => [
  { variable: `${pkg}.gitVersion`, value: "{version}" },
  { variable: `${pkg}.gitMajor`, value: "{major}" },
  { variable: `${pkg}.gitMinor`, value: "{minor}" },
  { variable: `${pkg}.gitTreeState`, value: "clean" },
  { variable: `${pkg}.gitCommit`, value: "" },
  { variable: `${pkg}.buildDate`, value: "{time}" },
]);

export const TOOL_SETS: ToolSet[] = [
  {
    set: "k8s",
    main: "k8s.io/kubernetes",
    replacesFrom: ["k8s.io/kubernetes"],
    staging: true,
    godebugFrom: "k8s.io/kubernetes",
    binaries: [
      { name: "kube-apiserver", pkg: "k8s.io/kubernetes/cmd/kube-apiserver", versionArgs: ["--version"] },
      {
        name: "kube-controller-manager",
        pkg: "k8s.io/kubernetes/cmd/kube-controller-manager",
        versionArgs: ["--version"],
      },
      { name: "kubectl", pkg: "k8s.io/kubernetes/cmd/kubectl", versionArgs: ["version", "--client"] },
    ],
    ldflags: kubeVersionFlags,
  },
  {
    set: "argocd",
    main: "github.com/argoproj/argo-cd/v3",
    replacesFrom: ["github.com/argoproj/argo-cd/v3"],
    staging: true,
    binaries: [
      { name: "argocd", pkg: "github.com/argoproj/argo-cd/v3/cmd", versionArgs: ["version", "--client"] },
    ],
    aliases: {
      "argocd-application-controller": "argocd",
      "argocd-repo-server": "argocd",
      "argocd-server": "argocd",
    },
    // As argo-cd's Makefile sets them; version is its VERSION file (no leading v).
    ldflags: [
      { variable: "github.com/argoproj/argo-cd/v3/common.version", value: "{semver}" },
      { variable: "github.com/argoproj/argo-cd/v3/common.buildDate", value: "{time}" },
      { variable: "github.com/argoproj/argo-cd/v3/common.gitTreeState", value: "clean" },
      { variable: "github.com/argoproj/argo-cd/v3/common.kubectlVersion", value: "{require:k8s.io/kubectl}" },
    ],
  },
  {
    set: "flux",
    main: "github.com/fluxcd/kustomize-controller",
    replacesFrom: [
      "github.com/fluxcd/source-controller",
      "github.com/fluxcd/kustomize-controller",
      "github.com/fluxcd/notification-controller",
    ],
    // The controllers have no version flag; --help proves the binary starts, and the build
    // reports each module's version from the binary's build information.
    binaries: [
      { name: "source-controller", pkg: "github.com/fluxcd/source-controller", versionArgs: ["--help"] },
      {
        name: "kustomize-controller",
        pkg: "github.com/fluxcd/kustomize-controller",
        versionArgs: ["--help"],
      },
      {
        name: "notification-controller",
        pkg: "github.com/fluxcd/notification-controller",
        versionArgs: ["--help"],
      },
    ],
  },
  {
    set: "etcd",
    main: "go.etcd.io/etcd/server/v3",
    replacesFrom: ["go.etcd.io/etcd/server/v3"],
    binaries: [{ name: "etcd", pkg: "go.etcd.io/etcd/server/v3", versionArgs: ["--version"] }],
  },
  {
    set: "kustomize",
    main: "sigs.k8s.io/kustomize/kustomize/v5",
    replacesFrom: ["sigs.k8s.io/kustomize/kustomize/v5"],
    binaries: [{ name: "kustomize", pkg: "sigs.k8s.io/kustomize/kustomize/v5", versionArgs: ["version"] }],
  },
  {
    set: "helm",
    main: "helm.sh/helm/v4",
    replacesFrom: ["helm.sh/helm/v4"],
    binaries: [{ name: "helm", pkg: "helm.sh/helm/v4/cmd/helm", versionArgs: ["version"] }],
    ldflags: [
      { variable: "helm.sh/helm/v4/internal/version.version", value: "{version}" },
      { variable: "helm.sh/helm/v4/internal/version.gitTreeState", value: "clean" },
    ],
  },
];

export const toolSet = (set: string): ToolSet => {
  const found = TOOL_SETS.find((t) => t.set === set);
  if (!found) throw new Error(`no tool set ${set}; known: ${TOOL_SETS.map((t) => t.set).join(", ")}`);
  return found;
};

/** Fills `{version}`, `{semver}`, `{major}`, `{minor}`, `{time}` and `{require:<module>}`. */
export function fillVersionFlag(
  value: string,
  version: string,
  time: string,
  requireOf: (module: string) => string,
): string {
  const m = /^v(\d+)\.(\d+)\.(\d+)/.exec(version);
  if (!m) throw new Error(`not a release version: ${version}`);
  return value.replace(/\{(version|semver|major|minor|time|require:[^}]+)\}/g, (_, key: string) => {
    if (key === "version") return version;
    if (key === "semver") return version.slice(1);
    if (key === "major") return m[1]!;
    if (key === "minor") return m[2]!;
    if (key === "time") return time;
    return requireOf(key.slice("require:".length));
  });
}
