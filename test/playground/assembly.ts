/**
 * The playground's assembly: every process of applygate plus the embedded services it runs
 * against, in one process. The scenario suite starts the same assembly.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ClusterCatalog } from "../../gateway/catalog-cluster.js";
import { type StartedGateway, startGateway } from "../../gateway/main.js";
import { crdFiles } from "../../queue/crds/files.js";
import { type Logger, silentLogger } from "../../queue/log.js";
import { type EmbeddedRedis, resolveEmbeddedRedis } from "../../queue/redis.js";
import { type ApiServer, startApiServer } from "../cluster/apiserver/index.js";
import { type GitServer, startGitServer } from "../git/server.js";
import {
  DEMO_BRANCH,
  DEMO_NAMESPACE,
  DEMO_REPO,
  demoFiles,
  demoObjectsYaml,
  hookPathFor,
  WEBHOOK_TOKEN,
} from "./demo.js";

export interface AssemblyOptions {
  log?: Logger;
  /** Redis prefix; the playground uses its own so it never touches another deployment's keys. */
  prefix?: string;
  /** Port for the gateway (0: any free one). */
  gatewayPort?: number;
  dashboard?: { user: string; password: string };
}

export interface Assembly {
  redis: EmbeddedRedis;
  prefix: string;
  git: GitServer;
  api: ApiServer;
  gateway: StartedGateway;
  workdir: string;
  kubeconfigPath: string;
  demo: { repoUrl: string; branch: string; namespace: string; hookUrl: string };
  dashboard: { url: string; user: string; password: string };
  stop(): Promise<void>;
}

export async function startAssembly(opts: AssemblyOptions = {}): Promise<Assembly> {
  const log = opts.log ?? silentLogger();
  const prefix = opts.prefix ?? "applygate-playground";
  const stops: Array<() => Promise<void>> = [];
  const stop = async () => {
    for (const s of stops.reverse()) await s().catch((err) => log.warn({ err }, "stop failed"));
  };
  try {
    const workdir = await mkdtemp(join(tmpdir(), "applygate-playground-"));
    stops.push(() => rm(workdir, { recursive: true, force: true }));

    const redis = await resolveEmbeddedRedis();
    stops.push(() => redis.stop());

    const api = await startApiServer();
    stops.push(() => api.close());
    for (const file of crdFiles()) await api.installCrdFile(file);
    const kubeconfigPath = join(workdir, "kubeconfig");
    await api.writeKubeconfig(kubeconfigPath);

    // The gateway's hook URL is known only once it listens; the Git server learns it then.
    let hookUrl = "";
    const git = await startGitServer({
      root: join(workdir, "git"),
      webhook: {
        get url() {
          return hookUrl;
        },
        secret: WEBHOOK_TOKEN,
      },
    });
    stops.push(() => git.close());
    const repoUrl = await git.createRepo(DEMO_REPO, demoFiles(), { branch: DEMO_BRANCH });
    await api.applyYaml(demoObjectsYaml(repoUrl));

    const catalog = await ClusterCatalog.start({
      kubeConfig: api.kubeConfig(),
      log: log.child({ component: "catalog" }),
    });
    stops.push(() => catalog.close());
    const dashboard = opts.dashboard ?? { user: "admin", password: "playground" };
    const gateway = await startGateway({
      redisUrl: redis.url,
      prefix,
      catalog,
      logger: log.child({ component: "gateway" }),
      port: opts.gatewayPort ?? 0,
      dashboard: { auth: { basic: { user: dashboard.user, password: dashboard.password } }, readOnly: false },
    });
    stops.push(() => gateway.close());
    hookUrl = `${gateway.url}${hookPathFor(WEBHOOK_TOKEN, DEMO_REPO, DEMO_NAMESPACE)}`;

    return {
      redis,
      prefix,
      git,
      api,
      gateway,
      workdir,
      kubeconfigPath,
      demo: { repoUrl, branch: DEMO_BRANCH, namespace: DEMO_NAMESPACE, hookUrl },
      dashboard: { url: `${gateway.url}/queues`, ...dashboard },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
