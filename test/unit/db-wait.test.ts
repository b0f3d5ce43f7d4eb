// Which database errors a starting process waits out, and how it waits (src/db/wait.ts).
// The real servers are in test/integration/db-wait.test.ts; here, the rules.
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { transientReason, waitForServer } from '../../src/db/wait.ts';

const pgError = (code: string, message = code) => Object.assign(new Error(message), { code });

function capturingLogger() {
  const lines: { level: number; msg: string; reason?: string }[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(JSON.parse(chunk.toString()));
      done();
    },
  });
  return { log: pino({ level: 'debug' }, stream), lines };
}

describe('transientReason', () => {
  it('waits out a server that is full, starting, restarting or not listening yet', () => {
    expect(transientReason(pgError('53300', 'sorry, too many clients already'))).toBe('too many connections');
    expect(transientReason(pgError('57P03', 'the database system is starting up'))).toMatch(/starting up/);
    expect(transientReason(pgError('57P01'))).toMatch(/shutting down/);
    expect(transientReason(pgError('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:5432'))).toMatch(/refused/);
    expect(transientReason(new Error('timeout exceeded when trying to connect'))).toMatch(/timed out/);
    expect(transientReason(new Error('Connection terminated unexpectedly'))).toMatch(/cut/);
  });

  it('follows causes and aggregate errors (a migration cut off, a host with several addresses)', () => {
    expect(transientReason(new Error('migration failed', { cause: pgError('57P01') }))).toMatch(/shutting down/);
    expect(transientReason(new AggregateError([pgError('ECONNREFUSED'), pgError('ECONNREFUSED')], ''))).toMatch(/refused/);
  });

  it('fails at once on what waiting cannot fix', () => {
    expect(transientReason(pgError('28P01', 'password authentication failed'))).toBeUndefined();
    expect(transientReason(pgError('28000', 'no pg_hba.conf entry'))).toBeUndefined();
    expect(transientReason(pgError('3D000', 'database "nope" does not exist'))).toBeUndefined();
    expect(transientReason(pgError('ENOTFOUND', 'getaddrinfo ENOTFOUND db.invalid'))).toBeUndefined();
    expect(transientReason(pgError('42501', 'permission denied for table x'))).toBeUndefined();
    expect(transientReason(new Error('something else'))).toBeUndefined();
  });
});

describe('waitForServer', () => {
  it('retries a transient failure with backoff, logging each reason once, until it succeeds', async () => {
    const { log, lines } = capturingLogger();
    const failures = [pgError('ECONNREFUSED'), pgError('57P03'), pgError('57P03'), pgError('53300'), pgError('53300')];
    const at: number[] = [];
    const t0 = performance.now();
    const result = await waitForServer(
      async () => {
        at.push(performance.now() - t0);
        const next = failures.shift();
        if (next) throw next;
        return 'open';
      },
      { waitMs: Infinity, log, what: 'Postgres', setting: 'test' },
    );
    expect(result).toBe('open');
    expect(at).toHaveLength(6);
    // 100, 200, 400, 800, 1600 ms (±20 %) between tries. Timers never fire early, so the
    // lower bounds hold however loaded the machine is.
    const gaps = at.slice(1).map((t, i) => t - at[i]!);
    gaps.forEach((gap, i) => expect(gap).toBeGreaterThanOrEqual(0.8 * 100 * 2 ** i - 2));
    const waits = lines.filter((l) => l.level === 40);
    expect(waits.map((l) => l.reason)).toEqual([transientReason(pgError('ECONNREFUSED')), transientReason(pgError('57P03')), 'too many connections']);
    expect(waits[0]!.msg).toMatch(/^waiting for Postgres: .*retrying with backoff \(test\)$/);
    expect(lines.at(-1)!.msg).toBe('Postgres is available');
  }, 10_000);

  it('throws a permanent error at once, and a transient one when the wait is up (0: one try)', async () => {
    const { log } = capturingLogger();
    let tries = 0;
    const permanent = pgError('3D000', 'database "nope" does not exist');
    await expect(waitForServer(async () => { tries++; throw permanent; }, { waitMs: Infinity, log, what: 'x', setting: 'x' })).rejects.toBe(permanent);
    expect(tries).toBe(1);

    tries = 0;
    await expect(waitForServer(async () => { tries++; throw pgError('ECONNREFUSED'); }, { waitMs: 0, log, what: 'x', setting: 'x' })).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    expect(tries).toBe(1);

    tries = 0;
    const t0 = performance.now();
    await expect(waitForServer(async () => { tries++; throw pgError('53300'); }, { waitMs: 700, log, what: 'x', setting: 'x' })).rejects.toMatchObject({ code: '53300' });
    const took = performance.now() - t0;
    expect(took).toBeGreaterThanOrEqual(690);
    expect(took).toBeLessThan(1_500); // the last try comes at the deadline, not a whole backoff step later
    expect(tries).toBeGreaterThanOrEqual(3);
  });
});
