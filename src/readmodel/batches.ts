// Group a stream of items into batches of whatever is already available, without waiting for
// more: a busy stream gives full batches, a quiet one gives each item as soon as it arrives.
const NOTHING_YET = Symbol('nothing yet');
const nextTurn = () => new Promise<typeof NOTHING_YET>((resolve) => setImmediate(resolve, NOTHING_YET));

export async function* availableBatches<T>(source: AsyncIterable<T>, maxBatch: number): AsyncGenerator<T[]> {
  const it = source[Symbol.asyncIterator]();
  let pending: Promise<IteratorResult<T>> | undefined;
  try {
    for (;;) {
      const first = await (pending ?? it.next());
      pending = undefined;
      if (first.done) return;
      const batch = [first.value];
      let done = false;
      // Items the source already holds resolve within microtasks, before setImmediate fires. One
      // turn per batch, not per item: a timer and two promises per event were 5% of the projector.
      const turn = nextTurn();
      while (batch.length < maxBatch) {
        pending = it.next();
        const r = await Promise.race([pending, turn]);
        if (r === NOTHING_YET) break;
        pending = undefined;
        if (r.done) {
          done = true;
          break;
        }
        batch.push(r.value);
      }
      yield batch;
      if (done) return;
    }
  } finally {
    // Let a pending read settle before closing the source, so it never runs unobserved.
    if (pending) await pending.catch(() => undefined);
    await it.return?.();
  }
}
