// Ids for what Baton stores: executions, workflows, schedules and events, and how every front door
// recognises one (UUID). New ones are UUIDv7 (RFC 9562): the
// first 48 bits are the Unix time in ms, the rest random (74 bits, from randomUUID), so ids made
// close in time sort close together. Every index keyed by them (baton_events' event ids, the
// (stream id, revision) key, baton_streams, the read model's rows) then takes new entries at its
// right edge instead of on random pages across the whole index: fewer pages touched and dirtied
// per insert, and fewer full-page images in the WAL after each checkpoint, a cost that grows with
// history once those indexes outgrow memory. Measured in `baton bench` (30,000 executions, five
// pairs alternated with the build before, random ids, 2026-11-29 01:2x UTC): CPU per execution in
// Postgres and the rest of the machine 328–425 → 265–330 µs (−14% to −25% pair by pair), in all
// 739–920 → 644–800 µs, executions/s 1,810–2,218 → 2,053–2,530 (+8% to +25%).
//
// Still UUIDs to every check and column. Their first eight hex digits are the time, so the
// console shows their last eight where it shortens an id.
import { randomUUID } from 'node:crypto';

/** A new UUIDv7: ~1 µs here, against 3.1 µs for the `uuid` package's v7. */
export function newId(): string {
  const random = randomUUID(); // xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx: keep what follows the version digit
  const ms = Date.now().toString(16).padStart(12, '0');
  return `${ms.slice(0, 8)}-${ms.slice(8)}-7${random.slice(15)}`;
}

/** Any UUID, of any version, in either case: what every front door (CLI, GraphQL, the client, the stores) accepts as an id. */
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
