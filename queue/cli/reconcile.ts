/**
 * `applygate reconcile <claim>`: asks the branch worker for an apply now, as `flux reconcile`
 * does, by setting the claim's `reconcile.applygate.dev/requestedAt` annotation. The worker takes
 * a new value as a reason (CatchUp) that goes through every rule an apply goes through (the
 * barrier, approvals, change and sync windows, suspend, an operation in flight, backoff): it never
 * goes around them. The command waits until the worker took the request (the claim's
 * `status.lastHandledReconcileAt`) and prints where it stands.
 */
import { ConfigError } from "../config.js";
import { RECONCILE_REQUESTED_ANNOTATION } from "../crds/index.js";
import { errorMessage } from "../errors.js";
import { type ClaimType, claimStatusField, claimTypeOf, type KObject, Kube } from "../kube/index.js";
import { KUBE_HELP, KUBE_OPTIONS, kubeTarget, parseFlags } from "./kube-flags.js";
import { type CommandIo, processIo } from "./status.js";

const OPTIONS = {
  namespace: KUBE_OPTIONS.namespace,
  kubeconfig: KUBE_OPTIONS.kubeconfig,
  context: KUBE_OPTIONS.context,
  help: KUBE_OPTIONS.help,
  timeout: { type: "string" },
} as const;

const HELP = [
  "usage: applygate reconcile CLAIM [flags]",
  "",
  "Asks the branch worker for an apply of the claim's folders now (annotation",
  `${RECONCILE_REQUESTED_ANNOTATION}), through the same rules as every apply, and waits until`,
  "the worker took the request. CLAIM is fluxclaim/NAME, argocdclaim/NAME, webhookclaim/NAME, or",
  "a NAME only one claim kind of the namespace has. `applygate status` says what the apply waits for.",
  "",
  "flags:",
  "      --timeout <secs>     how long to wait for the worker to take it (default 60; 0: do not wait)",
  ...KUBE_HELP.filter((l) => /--namespace|--kubeconfig|--context|--help/.test(l)),
].join("\n");

const KINDS: Record<string, "FluxClaim" | "ArgoCDClaim" | "WebhookClaim"> = {
  fluxclaim: "FluxClaim",
  fluxclaims: "FluxClaim",
  argocdclaim: "ArgoCDClaim",
  argocdclaims: "ArgoCDClaim",
  webhookclaim: "WebhookClaim",
  webhookclaims: "WebhookClaim",
};

/** `kind/name` or a bare name: the kinds to look in and the name (pure). */
export function parseClaimArg(arg: string): { kinds: ClaimType["kind"][]; name: string } {
  const slash = arg.indexOf("/");
  if (slash < 0) return { kinds: ["FluxClaim", "ArgoCDClaim", "WebhookClaim"], name: arg };
  const kind =
    KINDS[
      arg
        .slice(0, slash)
        .toLowerCase()
        .replace(/\.applygate\.dev$/, "")
    ];
  const name = arg.slice(slash + 1);
  if (!kind || !name)
    throw new ConfigError(
      `expected fluxclaim/NAME, argocdclaim/NAME, webhookclaim/NAME or NAME, got "${arg}"`,
    );
  return { kinds: [kind], name };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function run(argv: string[], io: CommandIo = processIo()): Promise<number> {
  const { values, positionals } = parseFlags(argv, OPTIONS);
  if (values.help) {
    io.stdout(`${HELP}\n`);
    return 0;
  }
  if (positionals.length !== 1) throw new ConfigError(`expected one claim, got ${positionals.length}`);
  const timeout = values.timeout === undefined ? 60 : Number(values.timeout);
  if (!(timeout >= 0))
    throw new ConfigError(`invalid setting --timeout: expected seconds, got "${values.timeout}"`);
  const { kinds, name } = parseClaimArg(positionals[0] as string);
  const target = kubeTarget(values);
  const kube = new Kube(target.kc);
  const ns = target.namespace;
  try {
    const found: { type: ClaimType; object: KObject }[] = [];
    for (const kind of kinds) {
      const type = claimTypeOf(kind);
      const object = await kube.get(type, ns, name);
      if (object) found.push({ type, object });
    }
    if (found.length === 0) {
      io.stderr(
        `applygate reconcile: no ${kinds.length === 1 ? kinds[0] : "claim"} "${name}" in namespace ${ns}\n`,
      );
      return 1;
    }
    if (found.length > 1) {
      io.stderr(
        `applygate reconcile: "${name}" names ${found.map((f) => f.type.kind).join(" and ")} in ${ns}: say which, e.g. ${found[0]?.type.kind.toLowerCase()}/${name}\n`,
      );
      return 1;
    }
    const { type } = found[0] as { type: ClaimType };
    const requestedAt = new Date().toISOString();
    await kube.mergePatch(type, ns, name, {
      metadata: { annotations: { [RECONCILE_REQUESTED_ANNOTATION]: requestedAt } },
    });
    io.stdout(
      `► ${type.kind} ${ns}/${name}: apply requested (${RECONCILE_REQUESTED_ANNOTATION}=${requestedAt})\n`,
    );
    if (timeout === 0) return 0;
    const deadline = Date.now() + timeout * 1000;
    while (Date.now() < deadline) {
      const c = await kube.get(type, ns, name);
      const handled = claimStatusField(c, "lastHandledReconcileAt");
      if (handled === requestedAt) {
        io.stdout(
          `✔ the branch worker took the request; it applies when every rule allows (applygate status -n ${ns})\n`,
        );
        return 0;
      }
      await sleep(500);
    }
    io.stderr(
      `applygate reconcile: the branch worker did not take the request within ${timeout}s (is the worker running, and does a GitTarget name this claim?)\n`,
    );
    return 1;
  } catch (err) {
    io.stderr(`applygate reconcile: ${errorMessage(err)}\n`);
    return 1;
  }
}
