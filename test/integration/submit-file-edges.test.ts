// `baton submit --file` at the edges a user's exports reach (real processes, real database):
// bytes that are not UTF-8 and a byte order mark, a directory for a file, options that belong to
// one submission, a key repeated in a batch (named by its line), null for an absent field, a
// line the store refuses (reported alone, the others stand), and --json on a refused file.
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createPostgresEventStore } from '../../src/eventstore/postgres.ts';
import { executionIdForKey, requestedEventIdOf } from '../../src/runtime/execution-runtime.ts';
import { runBaton, type CliResult } from '../support/cli.ts';
import { useTestDatabase } from '../support/test-db.ts';

const db = useTestDatabase();
const baton = (...args: string[]): Promise<CliResult> => runBaton(args, { databaseUrl: db().url });
const eventCount = async () => (await db().pool.query('SELECT count(*)::int AS n FROM baton_events')).rows[0].n as number;
const line = (o: object) => JSON.stringify(o);

async function withFile(content: string | Buffer, fn: (file: string, dir: string) => Promise<void>): Promise<void> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-submit-edges-'));
  try {
    const file = path.join(dir, 'jobs.ndjson');
    await fs.writeFile(file, content);
    await fn(file, dir);
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

/** Exit 1, one line on stderr matching `message`. */
function refused(r: CliResult, message: RegExp): void {
  expect(r.code, r.stderr).toBe(1);
  expect(r.stderr.trimEnd().split('\n'), r.stderr).toHaveLength(1);
  expect(r.stderr.trimEnd()).toMatch(message);
}

describe('baton submit --file, at the edges', { timeout: 120_000 }, () => {
  it('reads a UTF-8 byte order mark and CRLF lines; refuses a byte that is not UTF-8, naming its line, before anything of its batch is written', async () => {
    const ok = line({ action: 'core.noop' });
    await withFile(`\uFEFF${ok}\r\n${ok}\r\n`, async (file) => {
      const r = await baton('submit', '--file', file, '--json');
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ submitted: 2, created: 2 });
    });
    const latin1 = Buffer.concat([Buffer.from(`${ok}\n${ok}\n{"action":"core.echo","input":{"name":"caf`), Buffer.from([0xe9]), Buffer.from('"}}\n')]);
    await withFile(latin1, async (file) => {
      const before = await eventCount();
      refused(await baton('submit', '--file', file, '--batch-size', '1'), /^baton: line 3: not valid UTF-8 .*; nothing from line 3 on was written; lines 1–2 were submitted \(2 executions\)$/);
      expect(await eventCount()).toBe(before + 2);
    });
  });

  it('refuses a directory, --wait, --timeout and --batch-size without --file in one line each', async () => {
    await withFile(line({ action: 'core.noop' }), async (file, dir) => {
      const before = await eventCount();
      refused(await baton('submit', '--file', dir), /^baton: --file: .* is a directory; give an NDJSON file/);
      refused(await baton('submit', '--file', file, '--wait', '--timeout', '100'), /^baton: submit --file: --wait and --timeout work with a single submission only/);
      refused(await baton('submit', '--file', file, '--key', 'k'), /^baton: submit --file: --key belongs on each line of the file, as "idempotencyKey", not on the command line$/);
      refused(await baton('submit', 'core.noop', '--batch-size', '10'), /^baton: submit: --batch-size works with --file only/);
      // commander's own refusals: the error and a hint, not forty lines of usage.
      const outOfRange = await baton('submit', '--file', file, '--batch-size', '0');
      expect(outOfRange.code).toBe(1);
      expect(outOfRange.stderr.trimEnd().split('\n')).toEqual([expect.stringMatching(/^error: option '--batch-size <n>' argument '0' is invalid\. must be an integer from 1 to 1000$/), '(add --help for usage)']);
      expect(await eventCount()).toBe(before);
    });
  });

  it('a key repeated for a different request is that line\'s conflict, naming the earlier line, whatever the batch size; null is an absent field', async () => {
    for (const batchSize of ['1', '500']) {
      const key = `edges-${batchSize}-${Date.now()}`;
      const lines = [line({ action: 'core.noop' }), line({ action: 'core.echo', input: 1, idempotencyKey: key }), line({ action: 'core.echo', input: 2, idempotencyKey: key }), line({ action: 'core.noop' })];
      await withFile(lines.join('\n'), async (file) => {
        const r = await baton('submit', '--file', file, '--batch-size', batchSize, '--json');
        expect(r.code, r.stderr).toBe(1);
        const out = JSON.parse(r.stdout);
        expect(out, batchSize).toMatchObject({ submitted: 4, created: 3, conflicts: [{ line: 3, code: 'IDEMPOTENCY_CONFLICT' }] });
        if (batchSize === '500') expect(out.conflicts[0].error).toMatch(/\(differs in input from line 2\)$/);
      });
    }
    await withFile(line({ action: 'core.noop', priority: null, idempotencyKey: null, tags: null, namespace: null, maxAttempts: null, actionVersion: null }), async (file) => {
      const r = await baton('submit', '--file', file, '--json');
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ created: 1, executions: [{ line: 1, status: 'Requested' }] });
    });
  });

  it('reports a line the store refuses alone, with its code; the other lines of its batch are submitted and listed', async () => {
    // An event stored under the id the keyed line's ExecutionRequested would take (as an event
    // written by hand or by an older derivation might): the store refuses that line alone.
    const key = `taken-${Date.now()}`;
    const store = createPostgresEventStore(db().pool);
    await store.append(`elsewhere-${key}`, [{ eventId: requestedEventIdOf(executionIdForKey(key)), type: 'Note', data: {}, metadata: {} }], { expectedRevision: 'no_stream' });
    const lines = [line({ action: 'core.noop' }), line({ action: 'core.echo', input: 1, idempotencyKey: key }), line({ action: 'core.noop' })];
    await withFile(lines.join('\n'), async (file) => {
      const before = await eventCount();
      const r = await baton('submit', '--file', file, '--json');
      expect(r.code, r.stderr).toBe(1);
      const out = JSON.parse(r.stdout);
      expect(out).toMatchObject({ submitted: 3, created: 2, conflicts: [{ line: 2, code: 'REFUSED', executionId: executionIdForKey(key), error: expect.stringMatching(/already stored in a different position/) }] });
      expect(out.executions.filter((e: { created: boolean }) => e.created).map((e: { line: number }) => e.line)).toEqual([1, 3]);
      expect(await eventCount()).toBe(before + 2);
      const text = await baton('submit', '--file', file);
      expect(text.code).toBe(1);
      expect(text.stdout).toMatch(/: 2 created, 0 already submitted \(same idempotency key\), 1 refused\n  line 2: .*already stored in a different position/);
    });
  });

  it('--json on a refused file still lists the executions of the lines submitted before it', async () => {
    await withFile([line({ action: 'core.noop' }), line({ action: 'core.noop' }), line({ action: 'core.nop' })].join('\n'), async (file) => {
      const r = await baton('submit', '--file', file, '--batch-size', '1', '--json');
      expect(r.code).toBe(1);
      const out = JSON.parse(r.stdout);
      expect(out).toMatchObject({ submitted: 2, refused: { fromLine: 3 } });
      expect(out.executions.map((e: { line: number }) => e.line)).toEqual([1, 2]);
      expect(out.executions.every((e: { executionId: string }) => /^[0-9a-f-]{36}$/.test(e.executionId))).toBe(true);
    });
  });

  it('Ctrl-C midway stops sending, lets the batches sent finish, reports what was submitted, and exits 130; the file again goes on without duplicates', async () => {
    const lines = Array.from({ length: 20_000 }, (_, i) => line({ action: 'core.noop', idempotencyKey: `ctrl-c-${i}` })).join('\n');
    await withFile(`${lines}\n`, async (file) => {
      const { BATON_DATABASE_URL: _url, ...rest } = process.env;
      const child = spawn(process.execPath, [path.resolve('bin/baton.js'), 'submit', '--file', file, '--batch-size', '20', '--json'], {
        env: { ...rest, BATON_LOG_LEVEL: 'warn', BATON_DATABASE_URL: db().url },
      });
      let stdout = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      // Interrupted once some lines are stored.
      const stored = async () => (await db().pool.query("SELECT count(*)::int AS n FROM baton_events WHERE type = 'ExecutionRequested' AND data->>'idempotencyKey' LIKE 'ctrl-c-%'")).rows[0].n as number;
      for (const until = Date.now() + 30_000; (await stored()) < 100; await new Promise((r) => setTimeout(r, 20))) {
        if (Date.now() > until) throw new Error('no line was stored within 30 s');
      }
      child.kill('SIGINT');
      expect(await exited).toBe(130);
      const out = JSON.parse(stdout) as { submitted: number; interrupted: { signal: string; afterLine: number }; executions: { line: number }[] };
      expect(out.interrupted.signal).toBe('SIGINT');
      expect(out.interrupted.afterLine).toBeLessThan(20_000);
      expect(out.executions.map((e) => e.line)).toEqual(Array.from({ length: out.interrupted.afterLine }, (_, i) => i + 1));
      expect(await stored()).toBe(out.interrupted.afterLine); // nothing after it was sent
      const again = await baton('submit', '--file', file);
      expect(again.code, again.stderr).toBe(0);
      const n = (x: number) => x.toLocaleString('en');
      expect(again.stdout).toContain(`: ${n(20_000 - out.interrupted.afterLine)} created, ${n(out.interrupted.afterLine)} already submitted (same idempotency key), 0 refused`);
      expect(await stored()).toBe(20_000);
    });
  });

  it('a second Ctrl-C exits at once, naming the lines that were being stored; the file again stores each line once', async () => {
    const lines = Array.from({ length: 5_000 }, (_, i) => line({ action: 'core.noop', idempotencyKey: `twice-${i}` })).join('\n');
    await withFile(`${lines}\n`, async (file) => {
      const { BATON_DATABASE_URL: _url, ...rest } = process.env;
      const child = spawn(process.execPath, [path.resolve('bin/baton.js'), 'submit', '--file', file, '--batch-size', '50', '--json'], {
        env: { ...rest, BATON_LOG_LEVEL: 'warn', BATON_DATABASE_URL: db().url },
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      const storedLines = async () =>
        (await db().pool.query<{ key: string }>("SELECT data->>'idempotencyKey' AS key FROM baton_events WHERE type = 'ExecutionRequested' AND data->>'idempotencyKey' LIKE 'twice-%'")).rows.map((r) => Number(r.key.slice('twice-'.length)) + 1);
      for (const until = Date.now() + 30_000; (await storedLines()).length < 100; await new Promise((r) => setTimeout(r, 20))) {
        if (Date.now() > until) throw new Error('no line was stored within 30 s');
      }
      // Hold every append back, so batches are surely in flight when the second signal comes.
      const blocker = await db().pool.connect();
      try {
        await blocker.query('BEGIN');
        await blocker.query('LOCK TABLE baton_events IN EXCLUSIVE MODE');
        child.kill('SIGINT');
        for (const until = Date.now() + 10_000; !stderr.includes('again exits at once'); await new Promise((r) => setTimeout(r, 10))) {
          if (Date.now() > until) throw new Error(`no notice of the first SIGINT: ${stderr}`);
        }
        expect(stderr).toMatch(/^baton: SIGINT: sending no more lines; waiting for the \d batch(es)? being stored \(Ctrl-C again exits at once\)$/m);
        child.kill('SIGINT');
        expect(await exited).toBe(130);
      } finally {
        await blocker.query('ROLLBACK');
        blocker.release();
      }
      expect(stderr).toMatch(/baton: SIGINT again: exiting now, without waiting for the batches being stored\. Lines [\d–, ]+ may or may not have been stored; [\d,]+ other lines were submitted, and nothing after line \d+ was sent\./);
      const out = JSON.parse(stdout) as { interrupted: { exitedAtOnce: boolean; afterLine: number }; executions: { line: number }[]; failed: { lines: number[] } };
      expect(out.interrupted.exitedAtOnce).toBe(true);
      expect(out.failed.lines.length).toBeGreaterThan(0);
      // What is stored is what was reported submitted, and perhaps the lines named as in flight: nothing else.
      const told = new Set([...out.executions.map((e) => e.line), ...out.failed.lines]);
      for (const stored of await storedLines()) expect(told.has(stored), `line ${stored}`).toBe(true);
      for (const e of out.executions) expect(e.line).toBeLessThanOrEqual(out.interrupted.afterLine);
      const again = await baton('submit', '--file', file);
      expect(again.code, again.stderr).toBe(0);
      const keys = await storedLines();
      expect(keys.length).toBe(5_000);
      expect(new Set(keys).size).toBe(5_000);
    });
  });
});
