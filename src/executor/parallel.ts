// Run a list of async steps with at most `parallelism` in flight: the executor's appends are one
// round trip each, so a few dozen at once keep the database busy without flooding its pool.
export async function mapLimit<T>(items: readonly T[], parallelism: number, fn: (item: T) => Promise<void>): Promise<void> {
  let i = 0;
  await Promise.all(
    Array.from({ length: Math.min(parallelism, items.length) }, async () => {
      while (i < items.length) await fn(items[i++]!);
    }),
  );
}
