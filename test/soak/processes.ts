/**
 * The worker and the sidecars of a soak run, each either in the assembly's own process (a
 * graceful restart is all it can take) or in a child process of its own, which a run stops with
 * SIGTERM (graceful) or SIGKILL. A plan that kills a process runs it as a child from the start.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import type * as k8s from "@kubernetes/client-node";
import type { Assembly } from "../playground/assembly.js";
import type { Restartable } from "./plan.js";

const CHILD_SCRIPT: Record<Restartable, URL> = {
  worker: new URL("./worker-child.ts", import.meta.url),
  flux: new URL("../scenarios/sidecar-child.ts", import.meta.url),
  argocd: new URL("../scenarios/sidecar-child.ts", import.meta.url),
};

export interface Processes {
  /** Stops the process (SIGKILL when `kill`, else gracefully) and starts a new one. */
  restart(p: Restartable, kill: boolean): Promise<void>;
  /** Stops every child (SIGKILL: the assembly is going away). */
  close(): Promise<void>;
}

/**
 * Moves the named processes out of the assembly into children (before the run begins), and
 * answers the controller. `logLine` receives each line a child logs.
 */
export async function startProcesses(
  a: Assembly,
  inChildren: ReadonlySet<Restartable>,
  logLine: (line: string) => void,
): Promise<Processes> {
  const children = new Map<Restartable, ChildProcess>();
  const spawnChild = async (p: Restartable): Promise<void> => {
    const identity = a.identities[p].kubeConfig;
    const cluster = identity.getCurrentCluster() as k8s.Cluster;
    const user = identity.getCurrentUser() as k8s.User & { token: string };
    const env: Record<string, string> = {
      ...(process.env as Record<string, string>),
      SCENARIO_LOG: "debug",
      APPLYGATE_SERVER: cluster.server,
      APPLYGATE_USER: user.name,
      APPLYGATE_TOKEN: user.token,
      REDIS_URL: a.redis.url,
      REDIS_PREFIX: a.prefix,
    };
    if (p === "worker") {
      Object.assign(env, {
        CACHE_DIR: join(a.workdir, "worker-cache"),
        LEASE_MS: String(a.timers.leaseMs),
        LIST_INTERVAL_MS: String(a.timers.listIntervalMs),
        BRANCH_OPTIONS: JSON.stringify(a.timers.branch),
      });
    } else {
      Object.assign(env, {
        APPLIER: p,
        SIDECAR_OPTIONS: JSON.stringify(
          p === "argocd"
            ? { watchKinds: [{ apiVersion: "v1", kind: "ConfigMap" }], ...a.timers.sidecar.argocd }
            : a.timers.sidecar.flux,
        ),
        RESYNC_MS: String(a.timers.sidecar.resyncMs),
      });
    }
    const child = spawn(process.execPath, ["--import", "tsx", CHILD_SCRIPT[p].pathname], {
      stdio: ["ignore", "pipe", "pipe"],
      env,
    });
    children.set(p, child);
    createInterface({ input: child.stderr! }).on("line", (l) => logLine(`${l}\n`));
    const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
    const first = await lines.next();
    if (first.done || String(first.value).trim() !== "ready")
      throw new Error(`the ${p} process did not start`);
  };
  const end = (child: ChildProcess, signal: NodeJS.Signals): Promise<void> =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once("exit", () => resolve());
      child.kill(signal);
    });

  for (const p of inChildren) {
    if (p === "worker") await a.stopWorker();
    else await a.stopSidecar(p);
    await spawnChild(p);
  }

  let closed = false;
  return {
    async restart(p, kill) {
      const child = children.get(p);
      if (child) {
        await end(child, kill ? "SIGKILL" : "SIGTERM");
        // Closed meanwhile (a run past its bound kills a child whose stop hung): start no other.
        if (closed) throw new Error(`the run's processes are closed; the ${p} process is not started again`);
        await spawnChild(p);
      } else if (p === "worker") {
        await a.stopWorker();
        await a.startWorker();
      } else {
        await a.stopSidecar(p);
        await a.startSidecar(p);
      }
    },
    async close() {
      closed = true;
      for (const child of children.values()) await end(child, "SIGKILL");
      children.clear();
    },
  };
}
