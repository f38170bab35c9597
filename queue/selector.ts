/** A Kubernetes label selector over an object's labels (pure): the watch plane's and the sweep's. */
export interface LabelSelectorLike {
  matchLabels?: Record<string, string> | undefined;
  matchExpressions?:
    | { key: string; operator: "In" | "NotIn" | "Exists" | "DoesNotExist"; values?: string[] | undefined }[]
    | undefined;
}

export function matchesSelector(
  selector: LabelSelectorLike | undefined,
  labels: Record<string, string>,
): boolean {
  if (!selector) return true;
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of selector.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, e.key);
    const value = labels[e.key];
    const values = e.values ?? [];
    if (e.operator === "Exists" && !has) return false;
    if (e.operator === "DoesNotExist" && has) return false;
    if (e.operator === "In" && (!has || !values.includes(value as string))) return false;
    if (e.operator === "NotIn" && has && values.includes(value as string)) return false;
  }
  return true;
}
