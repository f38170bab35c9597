/**
 * Shapes of product code a test holds the line on, found in the syntax tree (so a cast written
 * over several lines, or with other spacing, is found as well): casts of a Kubernetes object's
 * `spec`, `status` or `metadata` (read them through typed readers instead), casts to Error (a
 * caught value is read through queue/errors.ts instead), exponential formulas (the product has one
 * backoff function, queue/backoff.ts), Kubernetes API clients and request headers built by hand
 * (every request goes through `Kube`, queue/kube/client.ts), and the length of classes.
 */
import { execFileSync } from "node:child_process";
import ts from "typescript";

export interface Found {
  line: number;
  text: string;
}

const OBJECT_PARTS = new Set(["spec", "status", "metadata"]);

/** Unwraps what does not change which value is cast: parentheses, `!`, and a fallback (`x ?? {}`). */
function castOperand(e: ts.Expression): ts.Expression {
  for (;;) {
    if (ts.isParenthesizedExpression(e) || ts.isNonNullExpression(e)) e = e.expression;
    else if (
      ts.isBinaryExpression(e) &&
      (e.operatorToken.kind === ts.SyntaxKind.QuestionQuestionToken ||
        e.operatorToken.kind === ts.SyntaxKind.BarBarToken)
    )
      e = e.left;
    else return e;
  }
}

function visitAll(fileName: string, text: string, visit: (node: ts.Node, at: (n: ts.Node) => Found) => void) {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const at = (n: ts.Node): Found => ({
    line: source.getLineAndCharacterOfPosition(n.getStart(source)).line + 1,
    text: n.getText(source).replace(/\s+/g, " ").slice(0, 120),
  });
  const walk = (node: ts.Node): void => {
    visit(node, at);
    ts.forEachChild(node, walk);
  };
  walk(source);
}

/** Each `x.spec as …`, `(x.status ?? {}) as …`, `<T>x.metadata` in a file. */
export function objectCasts(fileName: string, text: string): Found[] {
  const out: Found[] = [];
  visitAll(fileName, text, (node, at) => {
    if (!ts.isAsExpression(node) && !ts.isTypeAssertionExpression(node)) return;
    if (ts.isAsExpression(node) && ts.isConstTypeReference(node.type)) return;
    const operand = castOperand(node.expression);
    if (ts.isPropertyAccessExpression(operand) && OBJECT_PARTS.has(operand.name.text)) out.push(at(node));
  });
  return out;
}

/** The types a caught value is cast to when it is taken for an Error. */
const ERROR_TYPES = new Set(["Error", "ErrnoException", "NodeJS.ErrnoException"]);

/**
 * Whether a type takes a value for an Error: `Error`, `Error & { code?: number }`,
 * `Error | undefined`, `{ cause?: Error }`; not an Error inside a tuple, an array or a type
 * argument (`[Error | null, string][]`, ioredis's pipeline replies, describes no caught value).
 */
function namesError(type: ts.Node): boolean {
  if (ts.isTypeReferenceNode(type)) return ERROR_TYPES.has(type.typeName.getText());
  const within =
    ts.isUnionTypeNode(type) ||
    ts.isIntersectionTypeNode(type) ||
    ts.isParenthesizedTypeNode(type) ||
    ts.isTypeLiteralNode(type) ||
    ts.isPropertySignature(type);
  return within && (ts.forEachChild(type, (child) => namesError(child) || undefined) ?? false);
}

/** The rejection handler of a `.catch(h)` or `.then(f, h)` call, when it is written there. */
function rejectionHandler(call: ts.CallExpression): ts.SignatureDeclaration | undefined {
  if (!ts.isPropertyAccessExpression(call.expression)) return undefined;
  const method = call.expression.name.text;
  const handler = method === "catch" ? call.arguments[0] : method === "then" ? call.arguments[1] : undefined;
  return handler && (ts.isArrowFunction(handler) || ts.isFunctionExpression(handler)) ? handler : undefined;
}

/**
 * Each cast to Error in a file — `x as Error`, `<Error>x`, `x as Error & {…}`,
 * `x as NodeJS.ErrnoException` — and each rejection handler that takes an Error
 * (`.catch((err: Error) => …)`), which casts the same way: a thrown value need not be an Error (a
 * string, a rejection with a plain object).
 */
export function errorCasts(fileName: string, text: string): Found[] {
  const out: Found[] = [];
  visitAll(fileName, text, (node, at) => {
    if ((ts.isAsExpression(node) || ts.isTypeAssertionExpression(node)) && namesError(node.type))
      out.push(at(node));
    else if (ts.isCallExpression(node)) {
      const param = rejectionHandler(node)?.parameters[0];
      if (param?.type && namesError(param.type)) out.push(at(param));
    }
  });
  return out;
}

/** Each `a ** b` and `Math.pow(…)` in a file. */
export function exponentials(fileName: string, text: string): Found[] {
  const out: Found[] = [];
  visitAll(fileName, text, (node, at) => {
    if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.AsteriskAsteriskToken)
      out.push(at(node));
    else if (
      ts.isCallExpression(node) &&
      ts.isPropertyAccessExpression(node.expression) &&
      node.expression.getText() === "Math.pow"
    )
      out.push(at(node));
  });
  return out;
}

const CLIENT_FACTORIES = new Set(["makeApiClient", "setHeaderOptions"]);

/** Each API client or request option built by hand: `makeApiClient(…)`, `setHeaderOptions(…)`, `new …Api(…)`. */
export function kubeClients(fileName: string, text: string): Found[] {
  const out: Found[] = [];
  const nameOf = (e: ts.Expression) =>
    ts.isPropertyAccessExpression(e) ? e.name.text : ts.isIdentifier(e) ? e.text : "";
  visitAll(fileName, text, (node, at) => {
    if (ts.isCallExpression(node) && CLIENT_FACTORIES.has(nameOf(node.expression))) out.push(at(node));
    else if (ts.isNewExpression(node) && /Api$/.test(nameOf(node.expression))) out.push(at(node));
  });
  return out;
}

/** The product's TypeScript files (tests and test helpers left out). */
export function productFiles(root: string, folders: readonly string[] = ["gateway", "queue", "sidecar"]) {
  return execFileSync("git", ["ls-files", "--cached", "--others", "--exclude-standard", ...folders], {
    cwd: root,
    encoding: "utf8",
  })
    .split("\n")
    .filter((f) => f.endsWith(".ts") && !f.endsWith(".test.ts") && !/(^|[/-])testing\.ts$/.test(f));
}

/** Each class of a file, with its length in lines, from its first line to its closing brace. */
export function classLengths(
  fileName: string,
  text: string,
): { name: string; line: number; lines: number }[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true);
  const out: { name: string; line: number; lines: number }[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isClassDeclaration(node) || ts.isClassExpression(node)) {
      const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      out.push({
        name: `${fileName}:${node.name?.text ?? "(anonymous)"}`,
        line: first + 1,
        lines: last - first + 1,
      });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out;
}
