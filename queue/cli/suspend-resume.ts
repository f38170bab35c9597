/**
 * `applygate suspend|resume <gittarget>`: sets or clears a GitTarget's `spec.suspend`, as
 * `flux suspend|resume` does for a Kustomization. Suspended, the branch worker publishes nothing of
 * its folder and asks its applier for no apply (writes are still accepted and kept); resumed, what
 * waited goes through the usual rules. The kubeconfig's identity needs patch on gittargets.
 */
import { ConfigError } from "../config.js";
import { errorMessage } from "../errors.js";
import { Kube, RESOURCES } from "../kube/index.js";
import { KUBE_HELP, KUBE_OPTIONS, kubeTarget, parseFlags } from "./kube-flags.js";
import { type CommandIo, processIo } from "./status.js";

const OPTIONS = {
  namespace: KUBE_OPTIONS.namespace,
  kubeconfig: KUBE_OPTIONS.kubeconfig,
  context: KUBE_OPTIONS.context,
  help: KUBE_OPTIONS.help,
} as const;

export async function setSuspend(
  argv: string[],
  suspend: boolean,
  io: CommandIo = processIo(),
): Promise<number> {
  const verb = suspend ? "suspend" : "resume";
  const { values, positionals } = parseFlags(argv, OPTIONS);
  if (values.help) {
    io.stdout(
      [
        `usage: applygate ${verb} GITTARGET [flags]`,
        "",
        suspend
          ? "Sets spec.suspend on the GitTarget: its folder is frozen (no publication, no apply); writes are kept."
          : "Clears spec.suspend on the GitTarget: what waited is published and applied through the usual rules.",
        "",
        "flags:",
        ...KUBE_HELP.filter((l) => /--namespace|--kubeconfig|--context|--help/.test(l)),
        "",
      ].join("\n"),
    );
    return 0;
  }
  if (positionals.length !== 1)
    throw new ConfigError(`expected one GitTarget name, got ${positionals.length}`);
  const name = positionals[0] as string;
  const target = kubeTarget(values);
  const kube = new Kube(target.kc);
  try {
    // A merge patch of spec.suspend alone: null removes the field, as a GitTarget never suspended.
    await kube.mergePatch(RESOURCES.gitTarget, target.namespace, name, {
      spec: { suspend: suspend ? true : null },
    });
  } catch (err) {
    io.stderr(`applygate ${verb}: ${errorMessage(err)}\n`);
    return 1;
  }
  io.stdout(`gittarget ${target.namespace}/${name} ${suspend ? "suspended" : "resumed"}\n`);
  return 0;
}
