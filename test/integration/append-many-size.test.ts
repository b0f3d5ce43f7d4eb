// appendMany keeps each statement's JSON parameters in bounds (MAX_ROUND_TEXT): a round whose
// events carry more text is appended in halves, each request still with its own outcome. Large
// inputs (each under the 4 MiB input limit) in one `baton submit --file` batch once made a string
// past V8's longest, and the whole batch failed. On the real Postgres.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { AppendRequest } from '../../src/eventstore/event-store.ts';
import { MAX_ROUND_TEXT, roundValues } from '../../src/eventstore/pg-append-many.ts';
import { createPostgresEventStore } from '../../src/eventstore/postgres.ts';
import { useTestDatabase } from '../support/test-db.ts';

const db = useTestDatabase();

const request = (text: string): AppendRequest => ({
  streamId: `size-${randomUUID()}`,
  expectedRevision: 'no_stream',
  events: [{ eventId: randomUUID(), type: 'Big', data: { text }, metadata: {} }],
});

describe('appendMany with large events', () => {
  it('measures a round once and refuses only what has halves', () => {
    const small = [request('a'), request('b')];
    expect(roundValues(small, 1_000)).toHaveLength(10);
    expect(roundValues(small, 10)).toBeUndefined();
    expect(roundValues([small[0]!], 10)).toHaveLength(10); // alone: sent as it is
  });

  it('stores a batch whose events hold more than one statement may carry, every request with its own outcome', { timeout: 60_000 }, async () => {
    const store = createPostgresEventStore(db().pool);
    const third = 'x'.repeat(Math.ceil(MAX_ROUND_TEXT / 3) + 1024);
    const requests = [request(third), request(third), request(third), request('small')];
    const outcomes = await store.appendMany(requests);
    expect(outcomes.map((o) => o.ok)).toEqual([true, true, true, true]);
    for (const r of requests) {
      const [stored] = await store.readStream(r.streamId);
      expect(stored!.eventId).toBe(r.events[0]!.eventId);
      expect((stored!.data as { text: string }).text.length).toBe((r.events[0]!.data as { text: string }).text.length);
    }
    // A retry of the whole batch finds every append stored, none twice.
    const again = await store.appendMany(requests);
    expect(again.map((o) => o.ok && o.result.idempotentReplay)).toEqual([true, true, true, true]);
  });
});
