// Where the real tier finds the binaries `npm run real:build` made. Needs no Go: it hashes the same
// files the build hashed and looks in the same cache folder.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { binDir, cacheRoot } from "./tools/recipe.js";
import { TOOL_SETS } from "./tools/tools.js";

export const BUILD_COMMAND = "npm run real:build";

export type RealBinary =
  | "kube-apiserver"
  | "kube-controller-manager"
  | "kubectl"
  | "etcd"
  | "source-controller"
  | "kustomize-controller"
  | "notification-controller"
  | "argocd"
  | "argocd-application-controller"
  | "argocd-repo-server"
  | "argocd-server"
  | "kustomize"
  | "helm";

export type RealBinaries =
  | {
      built: true;
      path: (name: RealBinary) => string;
      /** The bin folders, for a child's PATH (Argo CD's repo-server runs kustomize and helm from it). */
      dirs: string[];
    }
  | { built: false; missing: RealBinary[]; message: string };

export const CONTROL_PLANE: RealBinary[] = ["etcd", "kube-apiserver", "kube-controller-manager"];

/** What the real tier needs built to run Flux (test/real/flux.ts). */
export const FLUX_BINARIES: RealBinary[] = ["source-controller", "kustomize-controller", "kubectl"];

/** What the real tier needs built to run Argo CD (test/real/argocd.ts). */
export const ARGOCD_BINARIES: RealBinary[] = [
  "argocd-application-controller",
  "argocd-repo-server",
  "kustomize",
  "kubectl",
];

/** Every receiver's setup beside applygate (test/real/push-to-applied.ts). */
export const RECEIVERS_BINARIES: RealBinary[] = [
  ...CONTROL_PLANE,
  ...FLUX_BINARIES,
  "notification-controller",
  ...ARGOCD_BINARIES,
  "argocd-server",
];

/**
 * The binaries of the current build, or which of those `needed` (default: all) are missing and the
 * one command that builds them.
 */
export function findRealBinaries(needed?: RealBinary[], root = cacheRoot()): RealBinaries {
  const where = new Map<string, string>();
  const dirs: string[] = [];
  for (const tool of TOOL_SETS) {
    const dir = binDir(tool, root);
    dirs.push(dir);
    for (const name of [...tool.binaries.map((b) => b.name), ...Object.keys(tool.aliases ?? {})]) {
      where.set(name, join(dir, name));
    }
  }
  const missing = [...where]
    .filter(([name, file]) => (!needed || needed.includes(name as RealBinary)) && !existsSync(file))
    .map(([name]) => name as RealBinary);
  if (missing.length > 0) {
    return {
      built: false,
      missing,
      message: `real components not built (missing: ${missing.join(", ")}); build them with: ${BUILD_COMMAND}`,
    };
  }
  return {
    built: true,
    dirs,
    path: (name) => {
      const file = where.get(name);
      if (!file) throw new Error(`no real binary named ${name}`);
      return file;
    },
  };
}
