/** One measured figure: benchmarks print these, one JSON line each, and never pass or fail. */
export interface Figure {
  bench: string;
  value: number;
  unit: string;
  baseline?: number;
  ratio?: number;
  /** Extra context (sizes, runs) printed alongside. */
  note?: string;
}

export type Benchmark = () => Promise<Figure[]>;
