/** Figures of benchmarks that time ours and a baseline back to back in pairs (flux-real, argocd-real). */
import type { Figure } from "./figure.js";
import { median } from "./send-to-apply.js";

/** `min …, max …` of a series, rounded to ms. */
export const spread = (xs: number[]): string => {
  const s = [...xs].sort((a, b) => a - b);
  return `min ${Math.round(s[0]!)}, max ${Math.round(s.at(-1)!)}`;
};

/** The time ours adds: the medians' difference, with each pair's difference in the note. */
export function addedTime(
  bench: string,
  ours: number[],
  plain: number[],
  note: string,
  what: string,
): Figure {
  const added = ours.map((o, i) => o - plain[i]!);
  return {
    bench,
    value: Math.round(median(ours) - median(plain)),
    unit: "ms",
    note: `${note}; median operation minus median ${what}; per pair: median ${Math.round(median(added))} (${added.map(Math.round).join(", ")})`,
  };
}
