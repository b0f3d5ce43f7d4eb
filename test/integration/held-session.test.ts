// A pool client held across other work (src/db/held-session.ts) whose connection is ended while it
// sits between queries: its next query fails, and nothing else happens. Without a listener the
// client's 'error' event was an uncaught exception that ended the process (a projector's rebuild
// lock, a retention run's lock: CI saw it when a test ended the database's sessions).
import { afterAll, describe, expect, it } from 'vitest';
import { holdSession } from '../../src/db/held-session.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

describe('holdSession', () => {
  let db: TestDatabase | undefined;
  afterAll(async () => db?.drop());

  it('survives its connection being ended between queries: the next query fails, the process goes on', async () => {
    db = await createTestDatabase();
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown) => void uncaught.push(err);
    process.on('uncaughtException', onUncaught);
    try {
      const client = await holdSession(db.pool);
      const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      await db.pool.query('SELECT pg_terminate_backend($1)', [pid]);
      // The server's FATAL reaches the idle client as an 'error' event; nothing to await for it
      // that would not itself listen for that event (which is what is under test).
      await new Promise((resolve) => setTimeout(resolve, 200));
      await expect(client.query('SELECT 1')).rejects.toThrow();
      client.release(true);
      expect(uncaught).toEqual([]);
    } finally {
      process.off('uncaughtException', onUncaught);
    }
  });
});
