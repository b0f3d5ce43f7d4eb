// Which event store the hosts and CLI open: no servers needed (neither adapter connects until used).
import type pg from 'pg';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { openEventStore } from '../../src/cli/event-store.ts';
import { loadConfig } from '../../src/config.ts';

function capture() {
  const lines: Record<string, unknown>[] = [];
  const log = pino({ level: 'debug' }, { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) });
  return { log, lines };
}
const pool = {} as pg.Pool; // never touched before the store is used

describe('openEventStore', () => {
  it('uses EventStoreDB/KurrentDB when BATON_EVENTSTORE_URL is set, and says so without the password', async () => {
    const { log, lines } = capture();
    const { store, kind } = await openEventStore(loadConfig({ BATON_EVENTSTORE_URL: 'kurrentdb://admin:changeit@db:2113?tls=false' }, '/srv'), pool, log);
    expect(kind).toBe('eventstoredb');
    expect(lines).toEqual([expect.objectContaining({ level: 30, eventStore: 'eventstoredb', url: 'kurrentdb://admin:***@db:2113?tls=false' })]);
    expect(String(lines[0]!.msg)).toMatch(/EventStoreDB\/KurrentDB.*read model.*Postgres/);
    await store.close();
  });

  it('uses Postgres otherwise; CLI commands announce it at debug level', async () => {
    const { log, lines } = capture();
    const { store, kind } = await openEventStore(loadConfig({}, '/srv'), pool, log, 'debug');
    expect(kind).toBe('postgres');
    expect(lines).toEqual([expect.objectContaining({ level: 20, eventStore: 'postgres', msg: 'event store: Postgres' })]);
    await store.close();
  });
});
