// The EventStore contract against a real EventStoreDB/KurrentDB server, whenever
// BATON_EVENTSTORE_URL is set (e.g. esdb://127.0.0.1:2113?tls=false). Without it the suite is
// skipped and says so in one line. Every test writes to streams with its own random prefix, so
// runs against a long-lived server never see each other's events.
//
// Capabilities that differ from Postgres (see src/eventstore/eventstoredb.ts):
// - openTransactions: false. The server orders commits itself; a client cannot hold an append open.
// - uniqueEventIds: false. The server deduplicates an id only at the revisions an append claims.
import { startRelay } from '../support/tcp-relay.ts';
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { redactUrl } from '../../src/db/connect.ts';
import { START, type StoredEvent } from '../../src/eventstore/event-store.ts';
import { createEventStoreDbEventStore } from '../../src/eventstore/eventstoredb.ts';
import { eventStoreContract, newEvent, type EventStoreHarness } from './event-store.contract.ts';

const url = loadConfig().eventStoreUrl;
const SKIPPED = 'EventStoreDB contract suite skipped: BATON_EVENTSTORE_URL is not set (no EventStoreDB server here)';
if (!url) console.warn(SKIPPED);

async function eventStoreDbHarness(): Promise<EventStoreHarness> {
  const store = createEventStoreDbEventStore(url!);
  return { store, close: () => store.close() };
}

function relayable(u: string): URL | null {
  try {
    const parsed = new URL(u);
    return !parsed.protocol.includes('+discover') && parsed.searchParams.get('tls') === 'false' ? parsed : null;
  } catch {
    return null; // a seed list of several hosts (not a WHATWG URL)
  }
}

describe.skipIf(!url)(url ? `EventStoreDB/KurrentDB at ${redactUrl(url)} (BATON_EVENTSTORE_URL)` : SKIPPED, () => {
  eventStoreContract('eventstoredb', eventStoreDbHarness, { openTransactions: false, uniqueEventIds: false });

  describe('eventstoredb adapter', () => {
    it('stores a reused eventId in another stream again: the gap `uniqueEventIds: false` stands for', async () => {
      const store = createEventStoreDbEventStore(url!);
      try {
        const e = newEvent();
        const [a, b] = [`contract-${randomUUID()}`, `contract-${randomUUID()}`];
        await store.append(a, [e], { expectedRevision: 'no_stream' });
        expect((await store.append(b, [e], { expectedRevision: 'no_stream' })).idempotentReplay).toBe(false);
        expect((await store.readStream(b)).map((x) => x.eventId)).toEqual([e.eventId]);
      } finally {
        await store.close();
      }
    });

    it('never returns system events from readAll, even without prefixes', async () => {
      const store = createEventStoreDbEventStore(url!);
      try {
        await store.append(`contract-${randomUUID()}`, [newEvent()], { expectedRevision: 'no_stream' });
        const all = await store.readAll({ after: START, limit: 2_000 });
        expect(all.length).toBeGreaterThan(0);
        expect(all.filter((e) => e.streamId.startsWith('$') || e.type.startsWith('$'))).toEqual([]);
      } finally {
        await store.close();
      }
    });

    const target = url ? relayable(url) : null;
    it.skipIf(!target)(
      `resubscribes after its connection is cut and delivers what was appended meanwhile${target ? '' : ' (skipped: needs a single node with tls=false)'}`,
      async () => {
        const r = await startRelay(target!, 2113);
        const direct = createEventStoreDbEventStore(url!);
        const viaRelay = createEventStoreDbEventStore(r.url, { reconnect: { initialMs: 50, maxMs: 500 } });
        const ac = new AbortController();
        try {
          const prefix = `rc${randomUUID().slice(0, 8)}`;
          const s = `${prefix}-${randomUUID()}`;
          await direct.append(s, [newEvent(), newEvent()], { expectedRevision: 'no_stream' });
          const seen: StoredEvent[] = [];
          let wake: (() => void) | undefined;
          const consumer = (async () => {
            for await (const e of viaRelay.subscribe({ after: START, streamPrefixes: [prefix], signal: ac.signal })) {
              seen.push(e);
              wake?.();
            }
          })();
          const until = (n: number) =>
            new Promise<void>((resolve, reject) => {
              const t = setTimeout(() => reject(new Error(`subscription delivered ${seen.length}/${n} events in 15 s`)), 15_000);
              wake = () => seen.length >= n && (clearTimeout(t), resolve());
              wake();
            });
          await until(2);
          r.cut();
          await direct.append(s, [newEvent('WhileCut')], { expectedRevision: 1n });
          await until(3);
          r.cut();
          await direct.append(s, [newEvent('AfterSecondCut')], { expectedRevision: 2n });
          await until(4);
          ac.abort();
          await consumer;
          expect(seen.map((e) => e.revision)).toEqual([0n, 1n, 2n, 3n]);
          expect(seen[2]!.type).toBe('WhileCut');
        } finally {
          ac.abort();
          await viaRelay.close();
          await direct.close();
          await r.close();
        }
      },
    );
  });
});
