// A store with a past: finished execution histories (completedHistory) and some in
// flight (their request only), appended with appendMany, for the benchmarks that measure what
// history costs (`baton bench start`, `baton bench --history`). Ids are made as Baton makes them
// (src/ids.ts), so the seeded history sits in the indexes where a real one would: before anything
// the measured run then stores.
import type pg from 'pg';
import { executionStreamId } from '../../schemas/events.ts';
import { mapLimit } from '../async/map-limit.ts';
import type { AppendRequest, EventStore } from '../eventstore/event-store.ts';
import { newId } from '../ids.ts';
import { readCheckpoint } from '../readmodel/checkpoints.ts';
import { catchUpReadModel } from '../readmodel/group-follow.ts';
import { completedHistory } from './projections.ts';

const STREAMS_PER_APPEND = 500;

/** Append `finished` finished executions and `live` requested ones, reporting progress every 20,000. */
export async function seedExecutions(store: Pick<EventStore, 'appendMany'>, o: { finished: number; live: number; progress: (line: string) => void }): Promise<void> {
  const total = o.finished + o.live;
  // Live ones interleaved with the finished (every step-th), as a long-running store has them.
  const step = o.live > 0 ? Math.floor(total / o.live) : 0;
  const isLive = (n: number) => step > 0 && n % step === 0 && n / step < o.live;
  const chunks: { from: number; size: number }[] = [];
  for (let from = 0; from < total; from += STREAMS_PER_APPEND) chunks.push({ from, size: Math.min(STREAMS_PER_APPEND, total - from) });
  let done = 0;
  await mapLimit(chunks, 2, async ({ from, size }) => {
    // Made per chunk, not all up front: a million histories are ~6 million event objects.
    const requests: AppendRequest[] = Array.from({ length: size }, (_, i) => {
      const history = completedHistory(`bench-${(from + i) % 4}`);
      return { streamId: executionStreamId(newId()), events: isLive(from + i) ? history.slice(0, 1) : history, expectedRevision: 'no_stream' as const };
    });
    const outcomes = await store.appendMany(requests);
    const failed = outcomes.find((o) => !o.ok);
    if (failed && !failed.ok) throw failed.error;
    done += size;
    if (done % 20_000 < STREAMS_PER_APPEND) o.progress(`      ${done.toLocaleString('en')} / ${total.toLocaleString('en')} executions`);
  });
}

/** Bring the read model up to the end of the store, saying every 5 s how far the executions projection is. */
export async function projectAll(pool: pg.Pool, store: EventStore, progress: (line: string) => void): Promise<void> {
  const end = (await pool.query<{ n: string }>('SELECT coalesce(max(global_position), 0) AS n FROM baton_events')).rows[0]!.n;
  const total = BigInt(end).toLocaleString('en');
  const report = setInterval(() => {
    readCheckpoint(pool, 'executions').then(
      // Positions, not counts: the two differ only where a rolled-back append left a gap.
      ({ position }) => progress(`      projected up to position ${position.toLocaleString('en')} of ${total}`),
      () => undefined,
    );
  }, 5_000);
  try {
    await catchUpReadModel({ pool, store });
  } finally {
    clearInterval(report);
  }
}
