// Pure translation between Baton's EventStore port and @eventstore/db-client (v6): positions,
// expected revisions, event data and metadata, errors. No I/O here, so every rule below has a
// unit test that runs without a server (test/unit/eventstoredb-mapping.test.ts); the adapter
// that uses it is ./eventstoredb.ts.
//
// Positions. EventStoreDB orders everything in one transaction log ($all). Each event has a
// {commit, prepare} position pair; for events written over gRPC (which has no explicit
// transactions) both halves are the event's own log position, so the commit position alone is
// unique per event, strictly increasing in $all order, and a valid place to resume from
// ({commit: c, prepare: c}). Baton's globalPosition is that commit position. A read of $all
// from a position includes the event at it, so `after` is applied here by dropping events
// at or before it; START (0n) is the start of $all (no event sits at log position 0).
import type { AllStreamResolvedEvent, AppendExpectedRevision, JSONEventData, JSONType, ReadPosition, ResolvedEvent } from '@eventstore/db-client';
import { BatonError, WrongExpectedRevisionError } from '../errors.ts';
import { START, type ExpectedRevision, type NewEvent, type StoredEvent } from './event-store.ts';

/**
 * Metadata key carrying a random id per append() call, on the batch's last event only. After a
 * successful append the adapter reads that event back: another call's id there means the server
 * deduplicated this append as a retry (idempotentReplay). Stripped on read.
 */
export const APPEND_ID_KEY = 'batonAppendId';

/**
 * EventStoreDB's own metadata keys for correlation and causation (its `$by_correlation_id`
 * system projection reads `$correlationId`). Written alongside Baton's keys when those are
 * strings, and dropped again on read when they merely repeat them.
 */
const ESDB_CORRELATION = '$correlationId';
const ESDB_CAUSATION = '$causationId';

/** Stream ids starting with `$` are EventStoreDB's system streams ($stats-…, $$metadata, $ce-…). */
export const isSystemStream = (streamId: string): boolean => streamId.startsWith('$');

export function toEsdbExpectedRevision(expected: ExpectedRevision): AppendExpectedRevision {
  if (expected === 'no_stream') return 'no_stream';
  if (expected === 'any') return 'any';
  return expected;
}

/** Where a read of $all starts to deliver events after `after` (the read includes its start). */
export function readPositionAfter(after: bigint): ReadPosition {
  if (typeof after !== 'bigint' || after < 0n) throw new BatonError('after must be a global position (a bigint >= 0, START for the beginning)');
  return after === START ? 'start' : { commit: after, prepare: after };
}

/** The `after` rule: true for events strictly past the resume point. */
export const isPast = (globalPosition: bigint, after: bigint): boolean => globalPosition > after;

// The largest value a position can hold is what servers before 22.6 put on stream reads (no
// position known); protobuf's default 0 is what an unset field reads as. Neither is an event's.
const MAX_U64 = 2n ** 64n - 1n;

/** The event's globalPosition: its commit position, or an error when the server did not say. */
export function globalPositionOf(resolved: ResolvedEvent | AllStreamResolvedEvent): bigint {
  const commit = resolved.event?.position?.commit ?? resolved.commitPosition;
  if (commit === undefined || commit <= 0n || commit >= MAX_U64) {
    throw new BatonError(
      `EventStoreDB did not report the $all position of event ${resolved.event?.id ?? '?'} in ${resolved.event?.streamId ?? '?'}: ` +
        'Baton needs EventStoreDB 22.6 or later (or KurrentDB), which reports it on stream reads too',
    );
  }
  return commit;
}

export function streamFilterFor(prefixes: readonly string[] | undefined): { prefixes: string[] } | { regex: string } {
  if (!prefixes || prefixes.length === 0) return { regex: '^[^$]' }; // every stream but the system ones
  for (const p of prefixes) {
    if (typeof p !== 'string') throw new BatonError('streamPrefixes must be strings');
    if (isSystemStream(p)) throw new BatonError(`stream prefix "${p}" names EventStoreDB system streams, which Baton never reads`);
  }
  return { prefixes: [...prefixes] };
}

/** The same test as the server-side filter, applied again to whatever arrives. */
export function wanted(streamId: string, prefixes: readonly string[] | undefined): boolean {
  if (isSystemStream(streamId)) return false;
  return !prefixes || prefixes.length === 0 || prefixes.some((p) => streamId.startsWith(p));
}

export function encodeMetadata(metadata: Record<string, unknown>, appendId?: string): Record<string, unknown> {
  const out: Record<string, unknown> = { ...(metadata ?? {}) };
  if (typeof out.correlationId === 'string' && !(ESDB_CORRELATION in out)) out[ESDB_CORRELATION] = out.correlationId;
  if (typeof out.causationId === 'string' && !(ESDB_CAUSATION in out)) out[ESDB_CAUSATION] = out.causationId;
  if (appendId !== undefined) out[APPEND_ID_KEY] = appendId;
  return out;
}

/** Metadata as the client hands it over: parsed JSON, raw bytes when it was not JSON, or nothing. */
export type RawMetadata = unknown;

function metadataObject(raw: RawMetadata): Record<string, unknown> {
  let value = raw;
  if (value instanceof Uint8Array) {
    try {
      value = JSON.parse(Buffer.from(value).toString('utf8'));
    } catch {
      return {};
    }
  }
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

export function decodeMetadata(raw: RawMetadata): Record<string, unknown> {
  const { [APPEND_ID_KEY]: _appendId, ...rest } = metadataObject(raw);
  if (ESDB_CORRELATION in rest && rest[ESDB_CORRELATION] === rest.correlationId) delete rest[ESDB_CORRELATION];
  if (ESDB_CAUSATION in rest && rest[ESDB_CAUSATION] === rest.causationId) delete rest[ESDB_CAUSATION];
  return rest;
}

/** The append id an event was written with (see APPEND_ID_KEY), if any. */
export function appendIdOf(raw: RawMetadata): string | undefined {
  const id = metadataObject(raw)[APPEND_ID_KEY];
  return typeof id === 'string' ? id : undefined;
}

/**
 * The client's JSON event. Baton data may be any JSON value (null, a number); the client only
 * JSON.stringify()s it, so the narrower JSONType of its typings is a formality.
 */
export function toEventData(event: NewEvent, appendId?: string): JSONEventData {
  return {
    id: event.eventId.toLowerCase(),
    contentType: 'application/json',
    type: event.type,
    data: (event.data ?? null) as JSONType,
    metadata: encodeMetadata(event.metadata, appendId),
  };
}

/** A read or subscription result as Baton's StoredEvent; null for what Baton never delivers. */
export function toStoredEvent(resolved: ResolvedEvent | AllStreamResolvedEvent): StoredEvent | null {
  const e = resolved.event;
  if (!e || isSystemStream(e.streamId) || e.type.startsWith('$')) return null;
  return {
    eventId: e.id.toLowerCase(),
    streamId: e.streamId,
    revision: e.revision,
    globalPosition: globalPositionOf(resolved),
    type: e.type,
    data: e.data,
    metadata: decodeMetadata(e.metadata),
    recordedAt: e.created,
  };
}

/** The client's wrong-expected-version error (matched by its `type`, so any copy of the package counts). */
export function isWrongExpectedVersion(err: unknown): err is { type: 'wrong-expected-version'; actualVersion: bigint | 'no_stream' } {
  return typeof err === 'object' && err !== null && (err as { type?: unknown }).type === 'wrong-expected-version';
}

/** A revision the client reported: no_stream, or below 0 (how some servers say "no stream"). */
export function currentRevision(actual: unknown): bigint | 'no_stream' {
  return typeof actual === 'bigint' && actual >= 0n ? actual : 'no_stream';
}

export function toWrongExpectedRevision(streamId: string, expected: ExpectedRevision, actual: unknown, cause?: unknown): WrongExpectedRevisionError {
  const e = new WrongExpectedRevisionError(streamId, expected, currentRevision(actual));
  if (cause !== undefined) e.cause = cause;
  return e;
}

/**
 * After a refused append: the revisions the batch would occupy had it been stored at the
 * expected revision, when the stream is long enough to hold any of them (then a retry whose
 * ids only partly match what is there can be told apart from a plain conflict).
 */
export function retryRange(expected: ExpectedRevision, actual: bigint | 'no_stream', count: number): { fromRevision: bigint; count: number } | null {
  if (expected === 'any' || actual === 'no_stream') return null;
  const fromRevision = expected === 'no_stream' ? 0n : expected + 1n;
  return fromRevision <= actual ? { fromRevision, count } : null;
}

/** How a batch's ids compare with what sits at the revisions it would occupy. */
export function compareStored(batchIds: readonly string[], storedIds: readonly string[]): 'same' | 'none' | { some: string[] } {
  const ids = batchIds.map((id) => id.toLowerCase());
  const stored = storedIds.map((id) => id.toLowerCase());
  if (stored.length === ids.length && ids.every((id, i) => stored[i] === id)) return 'same';
  const found = ids.filter((id) => stored.includes(id));
  return found.length === 0 ? 'none' : { some: found };
}

/**
 * Errors a subscription gives up on instead of reconnecting: they will not go away by trying
 * again (bad credentials, a position the server rejects, Baton's own mapping errors).
 */
export function isPermanentSubscriptionError(err: unknown): boolean {
  if (err instanceof BatonError) return true;
  const type = (err as { type?: unknown } | null)?.type;
  return type === 'access-denied' || type === 'invalid-argument' || type === 'unsupported';
}

export interface Backoff {
  initialMs: number;
  maxMs: number;
}
export const DEFAULT_RECONNECT_BACKOFF: Backoff = { initialMs: 100, maxMs: 5_000 };

/** The wait before reconnect attempt `attempt` (1-based): doubling from initialMs up to maxMs. */
export function reconnectDelay(attempt: number, b: Backoff = DEFAULT_RECONNECT_BACKOFF): number {
  return Math.min(b.maxMs, b.initialMs * 2 ** Math.max(0, Math.min(attempt - 1, 30)));
}

/**
 * BATON_EVENTSTORE_URL accepts KurrentDB's schemes (kurrentdb://, kurrent://, with +discover);
 * the @eventstore/db-client v6 parser knows only esdb:// and esdb+discover://. The servers speak
 * the same gRPC protocol, so only the scheme is rewritten; the rest (hosts, ?tls=…) is kept.
 */
export function toEsdbConnectionString(url: string): string {
  return url.replace(/^(?:kurrentdb|kurrent)(\+discover)?:\/\//i, (_m, discover: string | undefined) => `esdb${discover ?? ''}://`);
}
