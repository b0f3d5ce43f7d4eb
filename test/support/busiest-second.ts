/** The most of `times` (ms) that fall in any one-second window: what a per-second limit bounds. */
export function busiestSecond(times: number[]): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while (sorted[i]! - sorted[j]! >= 1_000) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

/** One time (ms) per token a rate bucket granted: what busiestSecond counts for a limiter. */
export function tokenTimes(grants: ReadonlyArray<{ data: { at: string; count: number } }>): number[] {
  return grants.flatMap((g) => Array<number>(g.data.count).fill(Date.parse(g.data.at)));
}
