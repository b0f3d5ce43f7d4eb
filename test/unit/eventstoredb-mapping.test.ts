// The EventStoreDB adapter's pure translation: no server needed, so these always run (the
// adapter against a server is test/contract/event-store.eventstoredb.test.ts).
import { randomUUID } from 'node:crypto';
import type { AllStreamResolvedEvent } from '@eventstore/db-client';
import { describe, expect, it } from 'vitest';
import { BatonError, WrongExpectedRevisionError } from '../../src/errors.ts';
import { START } from '../../src/eventstore/event-store.ts';
import {
  APPEND_ID_KEY,
  appendIdOf,
  compareStored,
  currentRevision,
  decodeMetadata,
  encodeMetadata,
  globalPositionOf,
  isPast,
  isPermanentSubscriptionError,
  isWrongExpectedVersion,
  readPositionAfter,
  reconnectDelay,
  retryRange,
  streamFilterFor,
  toEsdbConnectionString,
  toEsdbExpectedRevision,
  toEventData,
  toStoredEvent,
  toWrongExpectedRevision,
  wanted,
} from '../../src/eventstore/eventstoredb-mapping.ts';

/** A resolved event shaped like the client's (convertGrpcEvent) output. */
function resolved(o: { streamId?: string; type?: string; commit?: bigint; prepare?: bigint; metadata?: unknown; data?: unknown; noPosition?: boolean } = {}): AllStreamResolvedEvent {
  const commit = o.commit ?? 1234n;
  return {
    event: {
      streamId: o.streamId ?? 'execution-1',
      id: 'AB3C9A5E-1F43-4C4B-9D0B-6B1B3F1D2E7A',
      revision: 3n,
      type: o.type ?? 'ExecutionStarted',
      data: (o.data ?? { n: 1 }) as never,
      metadata: (o.metadata ?? { by: 'executor' }) as never,
      isJson: true,
      created: new Date('2026-01-02T03:04:05.678Z'),
      position: o.noPosition ? (undefined as never) : { commit, prepare: o.prepare ?? commit },
    },
  } as AllStreamResolvedEvent;
}

describe('EventStoreDB mapping: positions', () => {
  it('reads $all from its start for START, and from the event itself otherwise (the read includes it)', () => {
    expect(readPositionAfter(START)).toBe('start');
    expect(readPositionAfter(4711n)).toEqual({ commit: 4711n, prepare: 4711n });
    expect(() => readPositionAfter(-1n)).toThrow(BatonError);
  });

  it('applies `after` by dropping the event at the resume point and anything before it', () => {
    expect(isPast(10n, START)).toBe(true);
    expect(isPast(4711n, 4711n)).toBe(false);
    expect(isPast(4712n, 4711n)).toBe(true);
  });

  it('takes globalPosition from the commit position, and refuses a position the server did not report', () => {
    expect(globalPositionOf(resolved({ commit: 987_654_321_000n }))).toBe(987_654_321_000n);
    expect(globalPositionOf({ ...resolved({ noPosition: true }), commitPosition: 55n })).toBe(55n);
    expect(() => globalPositionOf(resolved({ noPosition: true }))).toThrow(/22\.6 or later/);
    expect(() => globalPositionOf(resolved({ commit: 0n }))).toThrow(BatonError); // protobuf's unset default
    expect(() => globalPositionOf(resolved({ commit: 2n ** 64n - 1n }))).toThrow(BatonError); // old servers on stream reads
  });
});

describe('EventStoreDB mapping: expected revisions and errors', () => {
  it("maps 'no_stream', 'any' and an exact revision to the client's NO_STREAM, ANY and bigint", () => {
    expect(toEsdbExpectedRevision('no_stream')).toBe('no_stream');
    expect(toEsdbExpectedRevision('any')).toBe('any');
    expect(toEsdbExpectedRevision(7n)).toBe(7n);
  });

  it("turns the client's wrong-expected-version error into WrongExpectedRevisionError, worded like Postgres's", () => {
    const clientError = Object.assign(new Error('Wrong expected version'), { type: 'wrong-expected-version', streamName: 's-1', expectedVersion: 1n, actualVersion: 2n });
    expect(isWrongExpectedVersion(clientError)).toBe(true);
    expect(isWrongExpectedVersion(new Error('other'))).toBe(false);
    const e = toWrongExpectedRevision('s-1', 1n, clientError.actualVersion, clientError);
    expect(e).toBeInstanceOf(WrongExpectedRevisionError);
    expect(e).toMatchObject({ streamId: 's-1', expected: 1n, actual: 2n, message: 's-1: expected revision 1, stream is at 2' });
    expect(e.cause).toBe(clientError);
    expect(toWrongExpectedRevision('s-2', 0n, 'no_stream').message).toBe('s-2: expected revision 0, stream is at no_stream');
  });

  it("reads a missing stream's revision however the client reports it", () => {
    expect(currentRevision('no_stream')).toBe('no_stream');
    expect(currentRevision(-1n)).toBe('no_stream');
    expect(currentRevision(undefined)).toBe('no_stream');
    expect(currentRevision(0n)).toBe(0n);
  });

  it('after a refusal, names the revisions a retried batch would occupy, when the stream reaches them', () => {
    expect(retryRange('no_stream', 1n, 2)).toEqual({ fromRevision: 0n, count: 2 });
    expect(retryRange(0n, 2n, 2)).toEqual({ fromRevision: 1n, count: 2 });
    expect(retryRange(2n, 2n, 1)).toBeNull(); // (not a refusal the server makes)
    expect(retryRange(5n, 2n, 1)).toBeNull(); // expected is ahead: nothing stored there
    expect(retryRange(0n, 'no_stream', 1)).toBeNull();
    expect(retryRange('any', 3n, 1)).toBeNull();
  });

  it('tells an identical earlier append, a plain conflict and a partial match apart (ids compared case-insensitively)', () => {
    const [a, b, c] = [randomUUID(), randomUUID(), randomUUID()];
    expect(compareStored([a, b], [a.toUpperCase(), b])).toBe('same');
    expect(compareStored([a, b], [c])).toBe('none');
    expect(compareStored([a, c], [a, b])).toEqual({ some: [a] });
    expect(compareStored([c, b], [b])).toEqual({ some: [b] });
  });

  it('reconnects a subscription after transient errors, with a doubling, capped wait; gives up on permanent ones', () => {
    expect([1, 2, 3, 4, 10, 100].map((n) => reconnectDelay(n, { initialMs: 100, maxMs: 5_000 }))).toEqual([100, 200, 400, 800, 5_000, 5_000]);
    expect(isPermanentSubscriptionError({ type: 'unavailable' })).toBe(false);
    expect(isPermanentSubscriptionError({ type: 'cancelled' })).toBe(false);
    expect(isPermanentSubscriptionError(new Error('premature close'))).toBe(false);
    expect(isPermanentSubscriptionError({ type: 'access-denied' })).toBe(true);
    expect(isPermanentSubscriptionError(new BatonError('bad position'))).toBe(true);
  });
});

describe('EventStoreDB mapping: events and metadata', () => {
  const metadata = { by: 'worker:w1', correlationId: 'c-1', causationId: 'e-0', machineVersion: 3, occurredAt: '2026-01-02T03:04:05.000Z', stateAfter: { value: 'Running' } };

  it("turns a NewEvent into the client's JSON event: the Baton eventId is the EventStoreDB event id", () => {
    const eventId = randomUUID().toUpperCase();
    const data = toEventData({ eventId, type: 'ExecutionStarted', data: { attempt: 1 }, metadata });
    expect(data).toEqual({
      id: eventId.toLowerCase(),
      contentType: 'application/json',
      type: 'ExecutionStarted',
      data: { attempt: 1 },
      metadata: { ...metadata, $correlationId: 'c-1', $causationId: 'e-0' },
    });
    expect(toEventData({ eventId, type: 'T', data: null, metadata: {} }).data).toBeNull();
  });

  it('round-trips metadata exactly, adding EventStoreDB’s $correlationId/$causationId on the way in', () => {
    const appendId = randomUUID();
    const stored = JSON.parse(JSON.stringify(encodeMetadata(metadata, appendId))) as Record<string, unknown>;
    expect(stored[APPEND_ID_KEY]).toBe(appendId);
    expect(appendIdOf(stored)).toBe(appendId);
    expect(decodeMetadata(stored)).toEqual(metadata);
    // A caller's own $correlationId that differs is kept as it was given.
    expect(decodeMetadata(encodeMetadata({ correlationId: 'a', $correlationId: 'b' }))).toEqual({ correlationId: 'a', $correlationId: 'b' });
  });

  it('decodes metadata the client could not parse, or that is missing, as {} (or the JSON inside the bytes)', () => {
    expect(decodeMetadata(undefined)).toEqual({});
    expect(decodeMetadata(new Uint8Array([1, 2, 3]))).toEqual({});
    expect(decodeMetadata(new TextEncoder().encode('{"by":"executor"}'))).toEqual({ by: 'executor' });
    expect(appendIdOf(undefined)).toBeUndefined();
  });

  it('turns a resolved event into a StoredEvent: recordedAt is the server’s created, globalPosition the commit position', () => {
    const e = resolved({ commit: 900n, metadata: encodeMetadata(metadata, randomUUID()) });
    expect(toStoredEvent(e)).toEqual({
      eventId: 'ab3c9a5e-1f43-4c4b-9d0b-6b1b3f1d2e7a',
      streamId: 'execution-1',
      revision: 3n,
      globalPosition: 900n,
      type: 'ExecutionStarted',
      data: { n: 1 },
      metadata,
      recordedAt: new Date('2026-01-02T03:04:05.678Z'),
    });
  });

  it('never delivers system events: $-prefixed streams, $-typed events, or entries without an event', () => {
    expect(toStoredEvent(resolved({ streamId: '$stats-127.0.0.1:2113' }))).toBeNull();
    expect(toStoredEvent(resolved({ streamId: '$$execution-1', type: '$metadata' }))).toBeNull();
    expect(toStoredEvent(resolved({ type: '$>' }))).toBeNull();
    expect(toStoredEvent({})).toBeNull();
  });
});

describe('EventStoreDB mapping: stream filters and connection strings', () => {
  it('filters on the server by Baton’s prefixes, or by "not a system stream" when none are given', () => {
    expect(streamFilterFor(['execution-', 'worker-'])).toEqual({ prefixes: ['execution-', 'worker-'] });
    expect(streamFilterFor(undefined)).toEqual({ regex: '^[^$]' });
    expect(streamFilterFor([])).toEqual({ regex: '^[^$]' });
    expect(() => streamFilterFor(['$ce-'])).toThrow(/system streams/);
  });

  it('applies the same test to what arrives', () => {
    expect(wanted('execution-1', ['execution-'])).toBe(true);
    expect(wanted('workflow-1', ['execution-'])).toBe(false);
    expect(wanted('workflow-1', undefined)).toBe(true);
    expect(wanted('$stats-x', undefined)).toBe(false);
    expect(wanted('$stats-x', [''])).toBe(false);
  });

  it("rewrites KurrentDB's URL schemes to the esdb:// ones the v6 client parses, keeping the rest", () => {
    expect(toEsdbConnectionString('kurrentdb://admin:changeit@db:2113?tls=false')).toBe('esdb://admin:changeit@db:2113?tls=false');
    expect(toEsdbConnectionString('kurrent+discover://a:2113,b:2113')).toBe('esdb+discover://a:2113,b:2113');
    expect(toEsdbConnectionString('KurrentDB://db:2113')).toBe('esdb://db:2113');
    expect(toEsdbConnectionString('esdb://db:2113?tls=false')).toBe('esdb://db:2113?tls=false');
  });
});
