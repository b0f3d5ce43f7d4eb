// The payload of a lone append's NOTIFY (src/eventstore/pg-append-hints.ts): what fits, and that a
// payload it does not understand is ignored rather than misread.
import { describe, expect, it } from 'vitest';
import { appendHint, heardEvents, senderOf } from '../../src/eventstore/pg-append-hints.ts';

const event = { eventId: '0b7e2f0e-3f7a-4a55-9a43-0d6f3c1f0a01', type: 'ExecutionRequested' };
const payload = (hint: string) => `sender-1\n2026-11-29 00:10:00.123456+00\n0:41\n${hint}`;

describe('append hints', () => {
  it('round-trips the events the statement stored, with the positions and time it adds', () => {
    const hint = appendHint('execution-1', [event], ['{"action":"a.b","input":{"x":"é"}}'], ['{"by":"executor"}'])!;
    expect(heardEvents(payload(hint))).toEqual([
      { eventId: event.eventId, streamId: 'execution-1', revision: 0n, globalPosition: 41n, type: 'ExecutionRequested', data: { action: 'a.b', input: { x: 'é' } }, metadata: { by: 'executor' }, recordedAt: new Date('2026-11-29T00:10:00.123Z') },
    ]);
    expect(senderOf(payload(hint))).toBe('sender-1');
    expect(senderOf('sender-1')).toBe('sender-1');
  });

  it('sends no events that would not fit in a NOTIFY, counting bytes, not characters', () => {
    expect(appendHint('execution-1', [event], [JSON.stringify('x'.repeat(6_500))], ['{}'])).not.toBeNull();
    expect(appendHint('execution-1', [event], [JSON.stringify('é'.repeat(3_900))], ['{}'])).toBeNull();
    expect(appendHint('execution-1', [event], [JSON.stringify('x'.repeat(7_800))], ['{}'])).toBeNull();
    // Many small events: their positions count too (up to 41 bytes each).
    const many = Array.from({ length: 120 }, () => event);
    expect(appendHint('execution-1', many, many.map(() => 'null'), many.map(() => '{}'))).toBeNull();
    expect(appendHint('execution-1', many.slice(0, 40), many.slice(0, 40).map(() => 'null'), many.slice(0, 40).map(() => '{}'))).not.toBeNull();
  });

  it('ignores a payload without events, or one it cannot read', () => {
    expect(heardEvents('sender-1')).toBeUndefined();
    expect(heardEvents(payload('{"s":"execution-1","e":['))).toBeUndefined(); // truncated
    expect(heardEvents(payload('{"s":"execution-1","e":[]}'))).toBeUndefined(); // one position, no event
    expect(heardEvents(`sender-1\nnot a time\n0:41\n${appendHint('execution-1', [event], ['null'], ['{}'])}`)).toBeUndefined();
    expect(heardEvents(`${payload(appendHint('execution-1', [event], ['null'], ['{}'])!)}\nmore`)).toBeUndefined();
  });
});
