/**
 * Just enough PromQL reading to list the metric names and grouping labels an expression uses.
 * Strings, label matchers, ranges and function calls are removed; what is left that looks like an
 * identifier and is not an operator keyword is a metric name.
 */
const KEYWORDS = new Set([
  "and",
  "or",
  "unless",
  "by",
  "without",
  "on",
  "ignoring",
  "group_left",
  "group_right",
  "bool",
  "offset",
  "inf",
  "nan",
]);

export interface ExprUse {
  metrics: string[];
  groupingLabels: string[];
}

export function readExpr(expr: string): ExprUse {
  let text = expr.replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""');
  text = text.replace(/\{[^}]*\}/g, " ").replace(/\[[^\]]*\]/g, " ");
  const groupingLabels: string[] = [];
  text = text.replace(
    /\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)/g,
    (_m, _kw, labels: string) => {
      for (const l of labels.split(",")) if (l.trim()) groupingLabels.push(l.trim());
      return " ";
    },
  );
  const metrics = new Set<string>();
  for (const m of text.matchAll(/[A-Za-z_:][A-Za-z0-9_:]*/g)) {
    const word = m[0];
    const after = text.slice((m.index ?? 0) + word.length);
    if (/^\s*\(/.test(after)) continue; // a function or aggregation
    if (KEYWORDS.has(word.toLowerCase())) continue;
    if (/^[0-9]/.test(word)) continue;
    metrics.add(word);
  }
  return { metrics: [...metrics], groupingLabels };
}
