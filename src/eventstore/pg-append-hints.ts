// The events of a lone append, carried in its own NOTIFY, so that a follower in another process can
// apply them without reading them back first (see EventStore.onAppendHeard). At light load that
// read was a round trip of its own on the way from a submit to the executor's handoff: ~0.55 ms
// of a ~2.4 ms pickup here, most of it the idle server waking up (a `SELECT 1` after a 20 ms pause
// takes 0.53 ms on this 2-core machine, 0.16 ms back to back).
//
// The payload is the sender's id, then the statement's commit time, the stored revisions and
// positions (which only the statement knows), and the events as the sender sent them:
//
//   <sender id> \n <recorded_at> \n <revision>:<position>,… \n {"s":<stream id>,"e":[[id,type,data,metadata],…]}
//
// NOTIFY payloads must stay under 8,000 bytes (a longer one fails the statement, the append with
// it): an append whose events, positions and all, might not fit sends the sender's
// id alone, as every other NOTIFY does, and its events are read as before. A hint is only ever a
// head start: followers still read every event, apply each revision once, and check that the
// event they read at a heard revision is the one they heard (any session of the database may
// NOTIFY; src/runtime/follow-actors.ts loads a stream again when it is not).
import type { StoredEvent } from './event-store.ts';
import { parseTime } from './pg-follow.ts';

/** A NOTIFY payload must be shorter than 8,000 bytes, or the statement (the append) fails. */
const PAYLOAD_LIMIT = 7_999;
/** The sender's id (a uuid), the commit time and the line breaks, with room to spare. */
const PAYLOAD_FIXED = 128;
/** `<revision>:<position>,` at its longest (two 19-digit bigints). */
const POSITION_BYTES = 41;

/**
 * The hint of an append (its events' JSON texts, as the statement sends them), or null when it
 * would not fit in a NOTIFY.
 */
export function appendHint(streamId: string, events: readonly { eventId: string; type: string }[], dataTexts: readonly string[], metadataTexts: readonly string[]): string | null {
  const budget = PAYLOAD_LIMIT - PAYLOAD_FIXED - events.length * POSITION_BYTES;
  let size = streamId.length + 16;
  for (let i = 0; i < events.length; i++) size += events[i]!.eventId.length + events[i]!.type.length + dataTexts[i]!.length + metadataTexts[i]!.length + 16;
  if (size > budget) return null;
  const rows = events.map((e, i) => `[${JSON.stringify(e.eventId)},${JSON.stringify(e.type)},${dataTexts[i]},${metadataTexts[i]}]`);
  const hint = `{"s":${JSON.stringify(streamId)},"e":[${rows.join(',')}]}`;
  // Multi-byte characters count as more than one byte: measured, not estimated.
  return Buffer.byteLength(hint) > budget ? null : hint;
}

/**
 * The NOTIFY payload expression of a lone append's statement, over its `ins` rows (revision,
 * global_position): the sender's id alone when the hint is null.
 */
export const hintedPayloadSql = (senderParam: string, hintParam: string) =>
  `CASE WHEN ${hintParam}::text IS NULL THEN ${senderParam}::text ELSE ${senderParam}::text || E'\\n' || now()::text || E'\\n' ||
     string_agg(revision::text || ':' || global_position::text, ',' ORDER BY revision) || E'\\n' || ${hintParam}::text END`;

/** The sender of a NOTIFY payload of the event store's channel (its first line). */
export const senderOf = (payload: string): string => {
  const end = payload.indexOf('\n');
  return end < 0 ? payload : payload.slice(0, end);
};

/** Whether a payload carries events after its sender line (heardEvents reads them). */
export const carriesEvents = (payload: string): boolean => payload.includes('\n');

/** The events a payload carries, as a read would return them; undefined when it carries none (or cannot be understood). */
export function heardEvents(payload: string): StoredEvent[] | undefined {
  const [, time, positions, hint, ...rest] = payload.split('\n');
  if (hint === undefined || rest.length > 0 || !time || !positions) return undefined;
  try {
    const { s: streamId, e: rows } = JSON.parse(hint) as { s: unknown; e: unknown };
    const stored = positions.split(',').map((p) => p.split(':'));
    if (typeof streamId !== 'string' || !Array.isArray(rows) || rows.length !== stored.length) return undefined;
    const recordedAt = parseTime(time);
    if (Number.isNaN(recordedAt.getTime())) return undefined;
    return rows.map((row: unknown, i) => {
      const [eventId, type, data, metadata] = row as [string, string, unknown, Record<string, unknown>];
      const [revision, position] = stored[i]!;
      return { eventId, streamId, revision: BigInt(revision!), globalPosition: BigInt(position!), type, data, metadata, recordedAt };
    });
  } catch {
    // Another version's payload, or a truncated one: the follower reads the events as before.
    return undefined;
  }
}
