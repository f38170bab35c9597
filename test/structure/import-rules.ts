/**
 * The import rules of the product's folders, and the checker that holds code to them: a graph of
 * which file imports which (type imports, re-exports and dynamic imports included), the rules a
 * graph breaks, and its import circles. Pure over the graph; `readImportGraph` is the only reader.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import ts from "typescript";

/** Importing file → what it imports: repository paths for our files, the specifier for packages. */
export type ImportGraph = Map<string, string[]>;

export interface ImportRule {
  name: string;
  /** The files the rule speaks of. */
  applies: (file: string) => boolean;
  /** Whether such a file may import a target (a repository path, or a package specifier). */
  allows: (target: string) => boolean;
}

/** A file's module specifiers: imports, `export … from`, `import("…")` calls and types. */
export function specifiersOf(fileName: string, text: string): string[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const out: string[] = [];
  const visit = (node: ts.Node): void => {
    if (
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    )
      out.push(node.moduleSpecifier.text);
    else if (
      ts.isImportEqualsDeclaration(node) &&
      ts.isExternalModuleReference(node.moduleReference) &&
      ts.isStringLiteral(node.moduleReference.expression)
    )
      out.push(node.moduleReference.expression.text);
    else if (
      ts.isImportTypeNode(node) &&
      ts.isLiteralTypeNode(node.argument) &&
      ts.isStringLiteral(node.argument.literal)
    )
      out.push(node.argument.literal.text);
    else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] &&
      ts.isStringLiteralLike(node.arguments[0])
    )
      out.push(node.arguments[0].text);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out;
}

/**
 * Where a specifier of `file` leads: a repository path for a relative one (`./x.js` is the
 * TypeScript file `x.ts` when there is one), the specifier itself for a package.
 */
export function resolveSpecifier(file: string, specifier: string, exists: (path: string) => boolean): string {
  if (!specifier.startsWith(".")) return specifier;
  const path = normalize(join(dirname(file), specifier))
    .split("\\")
    .join("/");
  const asTs = path.replace(/\.(m?)js$/, ".$1ts");
  return asTs !== path && exists(asTs) ? asTs : path;
}

/** The import graph of the product: every TypeScript file in `folders` but tests. */
export function readImportGraph(root: string, folders: readonly string[]): ImportGraph {
  const listed = execFileSync("git", ["ls-files", "--cached", "--others", "--exclude-standard", ...folders], {
    cwd: root,
    encoding: "utf8",
  });
  const files = listed
    .split("\n")
    .filter((f) => f.endsWith(".ts") && !f.endsWith(".test.ts") && existsSync(join(root, f)));
  const graph: ImportGraph = new Map();
  for (const file of files) {
    const text = readFileSync(join(root, file), "utf8");
    const targets = specifiersOf(file, text).map((s) =>
      resolveSpecifier(file, s, (p) => existsSync(join(root, p))),
    );
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

export interface Violation {
  /** `file → target`. */
  edge: string;
  rule: string;
}

/** Each import that breaks a rule, sorted by its edge. */
export function violations(graph: ImportGraph, rules: readonly ImportRule[]): Violation[] {
  const out: Violation[] = [];
  for (const [file, targets] of graph)
    for (const rule of rules)
      if (rule.applies(file))
        for (const target of targets)
          if (!rule.allows(target)) out.push({ edge: `${file} → ${target}`, rule: rule.name });
  return out.sort((a, b) => (a.edge < b.edge ? -1 : a.edge > b.edge ? 1 : 0));
}

/**
 * The import circles of a graph (strongly connected components of more than one file, or a file
 * that imports itself), each as its sorted files joined by ` ⇄ `, sorted.
 */
export function circles(graph: ImportGraph): string[] {
  // Tarjan's algorithm, iterative so a deep graph cannot overflow the stack.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const found: string[] = [];
  let next = 0;
  const edges = (f: string) => (graph.get(f) ?? []).filter((t) => graph.has(t));
  for (const start of graph.keys()) {
    if (index.has(start)) continue;
    const work: { file: string; i: number }[] = [{ file: start, i: 0 }];
    index.set(start, next);
    low.set(start, next++);
    stack.push(start);
    onStack.add(start);
    while (work.length > 0) {
      const top = work[work.length - 1]!;
      const out = edges(top.file);
      if (top.i < out.length) {
        const t = out[top.i++]!;
        if (!index.has(t)) {
          index.set(t, next);
          low.set(t, next++);
          stack.push(t);
          onStack.add(t);
          work.push({ file: t, i: 0 });
        } else if (onStack.has(t)) low.set(top.file, Math.min(low.get(top.file)!, index.get(t)!));
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent) low.set(parent.file, Math.min(low.get(parent.file)!, low.get(top.file)!));
      if (low.get(top.file) === index.get(top.file)) {
        const component: string[] = [];
        let f: string;
        do {
          f = stack.pop()!;
          onStack.delete(f);
          component.push(f);
        } while (f !== top.file);
        if (component.length > 1 || out.includes(top.file)) found.push(component.sort().join(" ⇄ "));
      }
    }
  }
  return found.sort();
}

const under = (folder: string) => (path: string) => path.startsWith(folder);

/** The worker service's own folders and entry point: what queue/ does not share between processes. */
const WORKER_SIDE = ["queue/worker/", "queue/apply/", "queue/decide/", "queue/cli/", "queue/worker-main.ts"];
const workerSide = (path: string) => WORKER_SIDE.some((d) => path.startsWith(d));

/** The rules of the product's folders (docs/development.md, "Import rules"). */
export const IMPORT_RULES: readonly ImportRule[] = [
  {
    name: "gateway and sidecar use what queue/ shares, not the worker's, the applier's or the decision core's internals",
    applies: (f) => under("gateway/")(f) || under("sidecar/")(f),
    allows: (t) => !["queue/worker/", "queue/apply/", "queue/decide/"].some((d) => t.startsWith(d)),
  },
  {
    name: "queue/crds is a leaf: the CRD schemas import only crds/, the contract and zod or yaml",
    applies: under("queue/crds/"),
    allows: (t) =>
      under("queue/crds/")(t) ||
      t === "queue/contract.ts" ||
      t.startsWith("node:") ||
      t === "zod" ||
      t === "yaml",
  },
  {
    name: "queue/contract.ts is a leaf: it imports only zod",
    applies: (f) => f === "queue/contract.ts",
    allows: (t) => t === "zod",
  },
  {
    name: "queue/decide/model.ts is the decision core's type leaf: it imports no logic, only the contract, crds/ and governance's vocabulary",
    applies: (f) => f === "queue/decide/model.ts",
    allows: (t) => t === "queue/contract.ts" || under("queue/crds/")(t) || t === "queue/governance/model.ts",
  },
  {
    name: "queue/governance/model.ts is governance's vocabulary: types only, importing only the contract and crds/",
    applies: (f) => f === "queue/governance/model.ts",
    allows: (t) => t === "queue/contract.ts" || under("queue/crds/")(t),
  },
  {
    name: "what queue/ shares between processes imports none of the worker's, the applier's or the decision core's internals",
    applies: (f) =>
      under("queue/")(f) && !workerSide(f) && !under("queue/crds/")(f) && f !== "queue/contract.ts",
    allows: (t) => !["queue/worker/", "queue/apply/", "queue/decide/"].some((d) => t.startsWith(d)),
  },
];
