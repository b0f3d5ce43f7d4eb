// Many appends or requests at once, but not all at once: a bounded pool of `parallelism`
// runners takes the items in order. Results come back in the items' order.

/** Runs `fn` on every item, at most `parallelism` at a time; rejects with the first failure (after the runners stop). */
export async function mapLimit<T, R>(items: readonly T[], parallelism: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(Math.max(1, parallelism), items.length) }, async () => {
      while (next < items.length) {
        const at = next++;
        out[at] = await fn(items[at]!);
      }
    }),
  );
  return out;
}
