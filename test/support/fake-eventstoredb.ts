// An in-memory stand-in for the parts of @eventstore/db-client's EventStoreDBClient that the
// EventStoreDB adapter calls, modelling the server's documented behaviour:
// - appends: expected revision checks and idempotence as EventStoreDB documents them (a stale
//   expected revision is a no-op success when the ids after it match, a conflict when none or
//   only some do; 'any' dedupes when the batch's first id is already in the stream), the reply
//   carrying the batch's last revision and, for a duplicate, the original position;
// - positions: one log, {commit, prepare} equal and increasing per event, system events ($stats…)
//   interleaved; reads of $all include the event at their start position;
// - subscriptions: catch-up then live, server-side stream-name filter, `dropConnections()` fails
//   every open subscription with the client's UnavailableError, as a server restart would.
// It lets the adapter's own logic run in every test run. It is a model, not the server: the
// contract suite against a real server is test/contract/event-store.eventstoredb.test.ts.
import { PassThrough, Readable } from 'node:stream';
import type { AllStreamResolvedEvent, AppendResult, EventData, Filter, ReadPosition, ResolvedEvent } from '@eventstore/db-client';

interface Rec {
  streamId: string;
  id: string;
  revision: bigint;
  type: string;
  data: string; // JSON, as the server stores it
  metadata: string;
  created: Date;
  position: bigint;
}

const commandError = (type: string, message: string, extra: Record<string, unknown> = {}) => Object.assign(new Error(message), { type, ...extra });

export class FakeEventStoreDb {
  private log: Rec[] = [];
  private streams = new Map<string, Rec[]>();
  private tombstoned = new Set<string>();
  private nextPosition = 1_000n;
  private subscriptions = new Set<PassThrough & { matches: (r: Rec) => boolean }>();
  appendCalls = 0;

  /** Write a system event, as the server does on its own ($stats-…, $$metadata, …). */
  writeSystemEvent(streamId = '$stats-127.0.0.1:2113'): void {
    this.write(streamId, [{ id: crypto.randomUUID(), type: '$statsCollected', data: '{}', metadata: '{}' }]);
  }

  /** Fail every open subscription the way a server restart or a dropped connection does. */
  dropConnections(): void {
    for (const s of this.subscriptions) s.destroy(commandError('unavailable', '14 UNAVAILABLE: Connection dropped'));
    this.subscriptions.clear();
  }

  get openSubscriptions(): number {
    return this.subscriptions.size;
  }

  private write(streamId: string, events: { id: string; type: string; data: string; metadata: string }[]): Rec[] {
    const stream = this.streams.get(streamId) ?? [];
    this.streams.set(streamId, stream);
    const written = events.map((e) => {
      const rec: Rec = { streamId, ...e, revision: BigInt(stream.length), created: new Date(), position: (this.nextPosition += 100n) };
      stream.push(rec);
      this.log.push(rec);
      return rec;
    });
    for (const s of this.subscriptions) for (const r of written) if (s.matches(r)) s.write(resolve(r));
    return written;
  }

  async appendToStream(streamId: string, input: EventData | EventData[], o: { expectedRevision?: bigint | 'no_stream' | 'any' | 'stream_exists' } = {}): Promise<AppendResult> {
    this.appendCalls++;
    await Promise.resolve();
    if (this.tombstoned.has(streamId)) throw commandError('stream-deleted', `${streamId} is deleted`, { streamName: streamId });
    const events = (Array.isArray(input) ? input : [input]).map((e) => ({
      id: e.id,
      type: e.type,
      data: JSON.stringify(e.data),
      metadata: JSON.stringify(e.metadata ?? {}),
    }));
    const stream = this.streams.get(streamId) ?? [];
    const current = BigInt(stream.length) - 1n;
    const expected = o.expectedRevision ?? 'any';
    const wrong = () => commandError('wrong-expected-version', 'Wrong expected version', { streamName: streamId, expectedVersion: expected, actualVersion: current < 0n ? 'no_stream' : current });
    const duplicate = (first: bigint): AppendResult => {
      const last = stream[Number(first) + events.length - 1]!;
      return { success: true, nextExpectedRevision: last.revision, position: { commit: last.position, prepare: last.position } };
    };
    if (expected === 'stream_exists') throw new Error('not modelled');
    if (expected === 'any') {
      const at = stream.findIndex((r) => r.id === events[0]!.id);
      if (at >= 0) {
        if (events.every((e, i) => stream[at + i]?.id === e.id)) return duplicate(BigInt(at));
        throw wrong(); // corrupted idempotency
      }
    } else {
      const exp = expected === 'no_stream' ? -1n : expected;
      if (exp > current) throw wrong();
      if (exp < current) {
        const from = Number(exp + 1n);
        if (events.every((e, i) => stream[from + i]?.id === e.id)) return duplicate(BigInt(from));
        throw wrong(); // none or only some match
      }
    }
    const written = this.write(streamId, events);
    const last = written[written.length - 1]!;
    return { success: true, nextExpectedRevision: last.revision, position: { commit: last.position, prepare: last.position } };
  }

  /** A hard delete: the stream reads as deleted and refuses appends; its events stay in $all (until a scavenge, which this model never runs). */
  async tombstoneStream(streamId: string, o: { expectedRevision?: bigint | 'any' } = {}): Promise<{ position?: { commit: bigint; prepare: bigint } }> {
    await Promise.resolve();
    if (this.tombstoned.has(streamId)) throw commandError('stream-deleted', `${streamId} is deleted`, { streamName: streamId });
    const stream = this.streams.get(streamId) ?? [];
    const current = BigInt(stream.length) - 1n;
    const expected = o.expectedRevision ?? 'any';
    if (expected !== 'any' && expected !== current) {
      throw commandError('wrong-expected-version', 'Wrong expected version', { streamName: streamId, expectedVersion: expected, actualVersion: current < 0n ? 'no_stream' : current });
    }
    this.tombstoned.add(streamId);
    return {};
  }

  readStream(streamId: string, o: { fromRevision?: bigint | 'start' | 'end'; maxCount?: number | bigint; direction?: 'forwards' | 'backwards' } = {}): Readable {
    if (this.tombstoned.has(streamId)) return failing(commandError('stream-deleted', `${streamId} is deleted`, { streamName: streamId }));
    const stream = this.streams.get(streamId);
    if (!stream) return failing(commandError('stream-not-found', `${streamId} not found`, { streamName: streamId }));
    const max = Number(o.maxCount ?? Number.MAX_SAFE_INTEGER);
    if (o.direction === 'backwards') {
      const from = o.fromRevision === 'end' || o.fromRevision === undefined ? stream.length - 1 : Number(o.fromRevision);
      return Readable.from(stream.slice(0, from + 1).reverse().slice(0, max).map(resolve));
    }
    const from = o.fromRevision === 'start' || o.fromRevision === undefined ? 0 : Number(o.fromRevision);
    return Readable.from(stream.slice(from, from + max).map(resolve));
  }

  readAll(o: { fromPosition?: ReadPosition; maxCount?: number | bigint } = {}): Readable {
    const from = startOf(o.fromPosition);
    return Readable.from(this.log.filter((r) => r.position >= from).slice(0, Number(o.maxCount ?? Number.MAX_SAFE_INTEGER)).map(resolve));
  }

  subscribeToAll(o: { fromPosition?: ReadPosition; filter?: Filter } = {}): PassThrough & { unsubscribe(): Promise<void> } {
    const from = startOf(o.fromPosition);
    const f = o.filter;
    const matches = (r: Rec) =>
      !f || ('prefixes' in f ? f.prefixes.some((p) => r.streamId.startsWith(p)) : new RegExp(f.regex).test(r.streamId));
    const sub = Object.assign(new PassThrough({ objectMode: true }), {
      matches,
      unsubscribe: async () => {
        this.subscriptions.delete(sub);
        sub.end();
      },
    });
    sub.on('close', () => this.subscriptions.delete(sub));
    queueMicrotask(() => {
      if (sub.destroyed) return;
      sub.emit('confirmation');
      for (const r of this.log) if (r.position >= from && matches(r)) sub.write(resolve(r));
      this.subscriptions.add(sub);
    });
    return sub;
  }

  async dispose(): Promise<void> {
    for (const s of this.subscriptions) s.end();
    this.subscriptions.clear();
  }
}

function startOf(p: ReadPosition | undefined): bigint {
  if (p === undefined || p === 'start') return 0n;
  if (p === 'end') return 2n ** 63n;
  if (p.commit !== p.prepare) throw new Error('the adapter resumes from {commit: c, prepare: c}');
  return p.commit;
}

function failing(err: Error): Readable {
  return new Readable({
    objectMode: true,
    read() {
      this.destroy(err);
    },
  });
}

/** What the client hands over for a stored event (convertGrpcEvent's shape). */
function resolve(r: Rec): ResolvedEvent & AllStreamResolvedEvent {
  return {
    event: {
      streamId: r.streamId,
      id: r.id,
      revision: r.revision,
      type: r.type,
      data: JSON.parse(r.data),
      metadata: JSON.parse(r.metadata),
      isJson: true,
      created: r.created,
      position: { commit: r.position, prepare: r.position },
    },
    commitPosition: r.position,
  } as ResolvedEvent & AllStreamResolvedEvent;
}
