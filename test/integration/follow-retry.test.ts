// catchUpAndFollow (src/eventstore/follow.ts) hands each event to a handler that may finish at
// once (no promise) or later (a promise), and gives an event that failed either way again after
// the backoff, without skipping it or handing on the next one first.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StoredEvent } from '../../src/eventstore/event-store.ts';
import { catchUpAndFollow } from '../../src/eventstore/follow.ts';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { silentLogger } from '../../src/log.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';
import { until } from '../support/until.ts';

describe('catchUpAndFollow with handlers that finish at once, later, or fail', () => {
  let db: TestDatabase;
  let store: PostgresEventStore;
  beforeAll(async () => {
    db = await createTestDatabase();
    store = createPostgresEventStore(db.pool);
  });
  afterAll(async () => {
    await store?.close();
    await db?.drop();
  });

  const append = (stream: string, n: number) =>
    store.append(stream, Array.from({ length: n }, (_, i) => ({ eventId: randomUUID(), type: 'Noted', data: { i }, metadata: {} })), { expectedRevision: 'any' });

  it.each(['catch-up', 'live'] as const)('in %s: every event once and in order, a failed one again before the next', async (phase) => {
    const stream = `retry-${phase}-${randomUUID()}`;
    if (phase === 'catch-up') await append(stream, 6);
    const calls: string[] = [];
    const handled: bigint[] = [];
    let failures = 0;
    let caughtUp = false;
    const ac = new AbortController();
    const following = catchUpAndFollow(
      { store, streamPrefixes: [stream], signal: ac.signal, log: silentLogger(), who: 'test' },
      {
        onEvent(e: StoredEvent) {
          const r = e.revision;
          calls.push(String(r));
          // Revision 1 throws once; revision 3 rejects once; odd ones finish later, even ones at once.
          if (r === 1n && failures === 0) {
            failures++;
            throw new Error('not now (thrown)');
          }
          if (r === 3n && failures === 1) {
            failures++;
            return Promise.reject(new Error('not now (rejected)'));
          }
          if (r % 2n === 0n) return void handled.push(r);
          return new Promise<void>((resolve) => setTimeout(resolve, 1)).then(() => void handled.push(r));
        },
        onCaughtUp: () => void (caughtUp = true),
      },
    );
    if (phase === 'live') {
      // Caught up on nothing: these six come through the subscription.
      await until('the follower to catch up', () => caughtUp);
      await append(stream, 6);
    }
    await until('six events handled', () => handled.length >= 6, 10_000);
    ac.abort();
    await following;
    expect(handled).toEqual([0n, 1n, 2n, 3n, 4n, 5n]);
    expect(calls).toEqual(['0', '1', '1', '2', '3', '3', '4', '5']);
  });
});
