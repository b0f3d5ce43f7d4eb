// `baton replay`, `inspect` and `export` as a user runs them: real processes against a real
// database. The compatibility gate flags exactly the in-flight executions a candidate machine
// would strand; a history exported here replays in a process with no database; a what-if fork
// leaves every table byte-for-byte unchanged.
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { MACHINE_VERSION } from '../../actors/execution.machine.ts';
import { createPostgresEventStore } from '../../src/eventstore/postgres.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { timeline } from '../../src/replay/inspect.ts';
import { runBaton, type CliResult } from '../support/cli.ts';
import { catchUpFully } from '../support/read-model.ts';
import { useTestDatabase } from '../support/test-db.ts';
import { readExecutionHistory } from '../../src/replay/execution-history.ts';

const CANDIDATE = 'test/fixtures/machines/without-completion.machine.ts';

const db = useTestDatabase();
let runtime: ExecutionRuntime;
const completed: string[] = [];
const running: string[] = [];
let requested: string;

/** Run `baton …` to the end; env replaces the database settings (none at all when null). */
const baton = (args: string[], o: { env?: Record<string, string> | null; cwd?: string } = {}): Promise<CliResult> =>
  runBaton(args, { databaseUrl: o.env === null ? null : db().url, ...(o.env && { env: o.env }), ...(o.cwd && { cwd: o.cwd }) });

const deadline = () => new Date(Date.now() + 600_000).toISOString();
async function startRun(workerId: string): Promise<string> {
  const { executionId } = await runtime.submit({ action: 'core.noop' });
  await runtime.dispatch(executionId, [
    { type: 'SchedulingStarted', data: {}, by: 'executor' },
    { type: 'ExecutionHandedOff', data: { workerId, attempt: 1, deadline: deadline() }, by: 'executor' },
  ]);
  await runtime.dispatch(executionId, { type: 'ExecutionStarted', data: { attempt: 1 }, by: `worker:${workerId}` });
  return executionId;
}

beforeAll(async () => {
  runtime = createExecutionRuntime(createPostgresEventStore(db().pool));
  for (let i = 0; i < 3; i++) {
    const id = await startRun('w1');
    for (let p = 0; p < 3; p++) await runtime.dispatch(id, { type: 'ExecutionProgressed', data: { details: { p } }, by: 'worker:w1' });
    await runtime.dispatch(id, { type: 'ExecutionCompleted', data: { result: { i } }, by: 'worker:w1' });
    completed.push(id);
  }
  for (let i = 0; i < 2; i++) running.push(await startRun('w2'));
  requested = (await runtime.submit({ action: 'core.noop' })).executionId;
  const cancelled = (await runtime.submit({ action: 'core.noop' })).executionId;
  await runtime.dispatch(cancelled, { type: 'ExecutionCancelled', data: { reason: 'test' }, by: 'executor' });
  await catchUpFully(db().pool, createPostgresEventStore(db().pool));
});

describe('baton replay', () => {
  it('replays every stored history through the current machine: no divergence, exit 0', async () => {
    const r = await baton(['replay', '--all']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^7 executions \\(35 events\\) replayed against current \\(version ${MACHINE_VERSION}\\)`, 'm'));
    expect(r.stdout).toMatch(/no divergence/);
  });

  it('--since passes over executions requested earlier', async () => {
    const r = await baton(['replay', '--all', '--since', new Date(Date.now() + 3_600_000).toISOString()]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^0 executions \(0 events, 7 passed over\)/m);
    const bad = await baton(['replay', '--all', '--since', 'yesterday']);
    expect(bad.code).toBe(1);
    // The same rule and words as every date-time argument of the API (src/input/rules.ts).
    expect(bad.stderr).toBe('baton: --since: must be an ISO 8601 date-time with a time zone, like 2024-05-01T12:00:00Z\n');
  });

  it('prints each step of one execution, and with a changed machine the divergence with both states, exit 1', async () => {
    const ok = await baton(['replay', completed[0]!]);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(/3\s+ExecutionStarted\s+worker:w1\s+Scheduled → Running\s+worker:w1/);
    const bad = await baton(['replay', completed[0]!, '--against', CANDIDATE]);
    expect(bad.code).toBe(1);
    expect(bad.stdout).toMatch(/7\s+ExecutionCompleted\s+worker:w1\s+Running → REFUSED\s+DIVERGES \(recorded Completed\)/);
    expect(bad.stdout).toMatch(/unhandled-event \(recorded: Completed, now: refused\): ExecutionCompleted is not handled in state Running/);
  });

  it('the deploy gate flags exactly the in-flight executions the candidate would strand, none of the finished', async () => {
    const r = await baton(['replay', '--in-flight', '--against', CANDIDATE, '--json']);
    expect(r.code).toBe(1);
    const report = JSON.parse(r.stdout);
    expect(report).toMatchObject({ streams: 3, inFlight: 3, divergentStreams: 2 });
    expect(report.divergences.map((d: any) => d.executionId).sort()).toEqual([...running].sort());
    expect(report.divergences.every((d: any) => d.kind === 'stranded' && d.expected === 'Running')).toBe(true);
    expect(report.divergences.some((d: any) => completed.includes(d.executionId) || d.executionId === requested)).toBe(false);
    const human = await baton(['replay', '--in-flight', '--against', CANDIDATE]);
    expect(human.stdout).toMatch(/2 execution\(s\) would break: do not deploy/);
    expect(human.stderr).toMatch(/checking in-flight executions: 35 events/);
  });

  it("the README's deploy gate: examples/candidate.machine.ts strands exactly the running executions", async () => {
    const r = await baton(['replay', '--in-flight', '--against', './examples/candidate.machine.ts', '--json']);
    expect(r.code, r.stderr).toBe(1);
    const report = JSON.parse(r.stdout);
    expect(report.against).toBe('./examples/candidate.machine.ts (version 4-candidate)');
    expect(report.divergences.map((d: any) => d.executionId).sort()).toEqual([...running].sort());
    expect(report.divergences.every((d: any) => d.kind === 'stranded' && /ExecutionProgressed/.test(d.reason))).toBe(true);
  });

  it('--all against the candidate reports the finished histories it cannot read too', async () => {
    const r = await baton(['replay', '--all', '--against', CANDIDATE, '--json']);
    expect(r.code).toBe(1);
    const ids = new Set(JSON.parse(r.stdout).divergences.map((d: any) => d.executionId));
    expect(ids).toEqual(new Set([...completed, ...running]));
  });

  it('refuses a module that exports no machine, naming what it exports', async () => {
    const r = await baton(['replay', '--all', '--against', 'test/fixtures/machines/edit-machine.ts']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/must export an xstate machine as `executionMachine`.*it exports editedMachine/);
  });
});

describe('baton export and replay --file', () => {
  it('replays an exported history in a process with no database URL', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-history-'));
    try {
      const exported = await baton(['export', completed[1]!]);
      expect(exported.code, exported.stderr).toBe(0);
      const file = path.join(dir, 'history.json');
      await fs.writeFile(file, exported.stdout);
      expect(JSON.parse(exported.stdout)).toMatchObject({ format: 'baton.execution-history', executionId: completed[1], events: expect.any(Array) });

      const offline = { cwd: dir, env: null };
      const r = await baton(['replay', '--file', file], offline);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/no divergence/);
      const bad = await baton(['replay', '--file', file, '--against', path.resolve(CANDIDATE)], offline);
      expect(bad.code).toBe(1);
      expect(bad.stdout).toMatch(/unhandled-event/);
      // No embedded database was started or created for it.
      await expect(fs.access(path.join(dir, '.baton'))).rejects.toThrow();
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it('refuses a damaged file, naming the field', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-history-'));
    try {
      const file = path.join(dir, 'bad.json');
      const id = '0192f3a4-5b6c-7d8e-9f01-23456789abcd';
      await fs.writeFile(file, JSON.stringify({ format: 'baton.execution-history', formatVersion: 1, executionId: id, events: [{ eventId: 'a', revision: 1, type: 'ExecutionRequested', data: {}, metadata: { by: 'executor' }, recordedAt: '2026-01-01T00:00:00Z' }] }));
      const r = await baton(['replay', '--file', file], { cwd: dir, env: null });
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/events\.0\.revision: expected revision 0/);
      // Edited by hand: data null, `by` gone, an execution id that is none: each named, nothing replayed.
      await fs.writeFile(file, JSON.stringify({ format: 'baton.execution-history', formatVersion: 1, executionId: 'nope', events: [{ eventId: 'a', revision: 0, type: 'ExecutionRequested', data: null, metadata: {}, recordedAt: '2026-01-01T00:00:00Z' }] }));
      const edited = await baton(['replay', '--file', file], { cwd: dir, env: null });
      expect(edited.code).toBe(1);
      expect(edited.stderr.trim()).toMatch(/^baton: invalid history file .*: executionId: must be an execution id \(a uuid\); events\.0\.data: .*; events\.0\.metadata\.by: /);
      // A real export edited: what no store could have held is refused, naming the place, not replayed as if absent.
      const exported = JSON.parse((await baton(['export', completed[1]!])).stdout) as { events: { type: string; data: Record<string, unknown>; metadata: Record<string, unknown> }[] } & Record<string, unknown>;
      const last = exported.events.length - 1;
      const edits: [(doc: typeof exported) => void, RegExp][] = [
        [(d) => (d.events[last]!.data['extra'] = 1), new RegExp(`events\\.${last}\\.data\\.extra: unknown field`)],
        [(d) => (d.events[last]!.metadata['extra'] = 1), new RegExp(`events\\.${last}\\.metadata\\.extra: unknown field`)],
        [(d) => ((d.events[last] as Record<string, unknown>)['extra'] = 1), new RegExp(`events\\.${last}\\.extra: unknown field`)],
        [(d) => (d['extra'] = 1), /\.json: extra: unknown field/],
        [(d) => (d.events[0]!.data['action'] = 'core.no\u0000op'), /events\.0\.data\.action: .*NUL/],
        [(d) => (d.events[last]!.type = 'ExecutionTeleported'), new RegExp(`events\\.${last}\\.type: `)],
      ];
      for (const [edit, message] of edits) {
        const doc = structuredClone(exported);
        edit(doc);
        await fs.writeFile(file, JSON.stringify(doc));
        const r = await baton(['replay', '--file', file], { cwd: dir, env: null });
        expect(r.code, r.stdout).toBe(1);
        expect(r.stderr.trim()).toMatch(/^baton: invalid history file /);
        expect(r.stderr.trim()).toMatch(message);
      }
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it('refuses a repeated key, a device and a pipe, for replay --file and inspect --file alike', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-history-'));
    try {
      const id = completed[0]!;
      const exported = (await baton(['export', id])).stdout;
      expect(exported).toMatch(/^\{\s*"format": "baton\.execution-history",/);
      // `"format"` twice, the real one last: JSON.parse kept the last and it replayed.
      const twice = path.join(dir, 'twice.json');
      await fs.writeFile(twice, exported.replace(/^\{/, '{"format":"zzz",'));
      // A key repeated inside an event is named by its place.
      const inner = path.join(dir, 'inner.json');
      await fs.writeFile(inner, exported.replace(/"eventId":/, '"type":"X","eventId":'));
      const fifo = path.join(dir, 'pipe');
      execFileSync('mkfifo', [fifo]);
      for (const read of [(file: string) => ['replay', '--file', file], (file: string) => ['inspect', id, '--file', file]]) {
        const [a, b, zero, pipe] = await Promise.all([baton(read(twice), { env: null, cwd: dir }), baton(read(inner), { env: null, cwd: dir }), baton(read('/dev/zero'), { env: null, cwd: dir }), baton(read(fifo), { env: null, cwd: dir })]);
        expect(a.code).toBe(1);
        expect(a.stderr).toBe(`baton: invalid history file ${twice}: format: appears twice in one object (JSON would keep only the last): give it once\n`);
        expect(b.code).toBe(1);
        expect(b.stderr).toMatch(/^baton: invalid history file .*: events\.0\.type: appears twice in one object/);
        // /dev/zero was read to ~640 MB, then "cannot be read: Invalid string length"; a pipe waited for a writer.
        expect(zero.code).toBe(1);
        expect(zero.stderr).toBe('baton: history file /dev/zero is not a regular file (a device, pipe or socket); give the path of a history file\n');
        expect(pipe.code).toBe(1);
        expect(pipe.stderr).toBe(`baton: history file ${fifo} is not a regular file (a device, pipe or socket); give the path of a history file\n`);
      }
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});

describe('baton inspect', () => {
  it('shows the state at a revision and at an instant, as the fold of that prefix gives it', async () => {
    const id = completed[2]!;
    const steps = timeline(id, await readExecutionHistory(runtime.store, id));
    const at3 = JSON.parse((await baton(['inspect', id, '--at', '3', '--json'])).stdout);
    expect(at3).toMatchObject({ revision: 3, state: 'Running', owner: 'worker:w1', attempt: 1, type: 'ExecutionStarted' });
    expect(at3.context).toEqual(JSON.parse(JSON.stringify(steps[3]!.context)));
    expect(at3.next).toContainEqual({ type: 'ExecutionCompleted', by: 'worker:w1' });
    const byTime = JSON.parse((await baton(['inspect', id, '--at', steps[5]!.recordedAt, '--json'])).stdout);
    expect(byTime.revision).toBeGreaterThanOrEqual(5); // events recorded in the same millisecond count too
    const human = await baton(['inspect', id, '--at', '2']);
    expect(human.stdout).toMatch(/state\s+Scheduling → Scheduled/);
    expect(human.stdout).toMatch(/next\s+ExecutionStarted \(worker:w1\)/);
    const early = await baton(['inspect', id, '--at', '2000-01-01T00:00:00Z']);
    expect(early.code).toBe(1);
    expect(early.stderr).toMatch(/nothing was recorded at or before 2000-01-01T00:00:00.000Z/);
    // A number is a revision, refused as one when it cannot be: not read as a time, not rounded.
    for (const [option, value] of [['--at', '-1'], ['--at', '1.5'], ['--fork-at', 'x']]) {
      const bad = await baton(['inspect', id, option!, value!]);
      expect(bad.code, `${option} ${value}`).toBe(1);
      expect(bad.stderr).toBe(`baton: ${option}: must be a revision (0, 1, 2, …), got "${value}"\n`);
    }
    const huge = await baton(['inspect', id, '--at', '99999999999999999999']);
    expect(huge.stderr).toBe("baton: --at: must be a revision from 0 to the history's last, got 99999999999999999999, past any history\n");
    const past = await baton(['inspect', id, '--at', '99']);
    expect(past.code).toBe(1);
    expect(past.stderr).toMatch(/^baton: invalid inspect point: --at: must be a revision from 0 to \d+ \(this history's\), got 99\n$/);
    const pastFork = await baton(['inspect', id, '--fork-at', '99', '--event', '{"type":"ExecutionCancelled","data":{"reason":"x"}}']);
    expect(pastFork.stderr).toMatch(/^baton: invalid inspect point: --fork-at: must be a revision from 0 to \d+ \(this history's\), got 99\n$/);
  });

  it('a what-if fork prints the simulated states and leaves the store and read model byte-for-byte unchanged', async () => {
    const before = await fingerprint();
    const r = await baton(['inspect', running[0]!, '--fork-at', '3', '--event', '{"type":"ExecutionFailed","data":{"error":{"message":"disk full"},"retryable":false}}']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/1\s+ExecutionFailed\s+worker:w2\s+Running → Failed/);
    expect(r.stdout).toMatch(/nothing is written/);
    const refused = await baton(['inspect', running[0]!, '--fork-at', '1', '--event', '{"type":"ExecutionCompleted","data":{"result":1},"by":"worker:w2"}']);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toMatch(/Scheduling → REFUSED\s+InvalidTransition: ExecutionCompleted is not allowed in state Scheduling/);
    expect(await fingerprint()).toEqual(before);
  });

  it('a what-if counts its events from 1 everywhere: the # column, the refusal, and a malformed event', async () => {
    const id = running[1]!;
    const progressed = '{"type":"ExecutionProgressed","data":{}}';
    const refused = await baton(['inspect', id, '--fork-at', '3', '--event', progressed, '--event', '{"type":"ExecutionStarted","data":{"attempt":1}}']);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toMatch(/\n1\s+ExecutionProgressed\s+worker:w2\s+Running → Running/);
    expect(refused.stdout).toMatch(/\n2\s+ExecutionStarted\s+worker:w2\s+Running → REFUSED/);
    expect(refused.stdout).toMatch(/refused: the machine would not take event 2\n$/);
    // The same second event, malformed: named as event 2 too, the row it would have had.
    const malformed = await baton(['inspect', id, '--fork-at', '3', '--event', progressed, '--event', '{"type":"ExecutionFailed","data":{"retryable":false}}']);
    expect(malformed.code).toBe(1);
    expect(malformed.stderr).toMatch(/^baton: invalid fork event 2 \(ExecutionFailed\): data\.error: /);
  });
});

describe('a history a newer Baton wrote', () => {
  it('every replaying command says so, naming the version and to upgrade: never an unhandled event or a refused transition', async () => {
    const newer = String(Number(MACHINE_VERSION) + 1);
    const reason = `written by execution machine version ${newer}; this build of Baton knows versions 1–${MACHINE_VERSION}: upgrade Baton to read this history`;
    const { executionId: id } = await runtime.submit({ action: 'core.noop' });
    // What a newer build would append next: an ordinary event, naming its own machine version.
    const store = createPostgresEventStore(db().pool);
    await store.append(`execution-${id}`, [{ eventId: randomUUID(), type: 'SchedulingStarted', data: {}, metadata: { by: 'executor', occurredAt: new Date().toISOString(), machineVersion: newer, stateAfter: 'Scheduling' } }], { expectedRevision: 0n });
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-history-'));
    try {
      const file = path.join(dir, 'newer.json');
      await fs.writeFile(file, (await baton(['export', id])).stdout);
      for (const args of [['replay', id], ['replay', '--file', file], ['replay', id, '--against', 'recorded']]) {
        const r = await baton(args);
        expect(r.code, args.join(' ')).toBe(1);
        expect(r.stdout, args.join(' ')).toMatch(new RegExp(`\\n1\\s+SchedulingStarted\\s+executor\\s+Requested → \\(not replayed\\)\\s+UNREADABLE \\(machine version ${newer}\\)`));
        expect(r.stdout, args.join(' ')).toContain(`1 divergence(s):\n  ${id} @1 SchedulingStarted: unreadable: ${reason}\n`);
        expect(r.stdout, args.join(' ')).not.toMatch(/unhandled-event|REFUSED/);
      }
      const all = JSON.parse((await baton(['replay', '--all', '--json'])).stdout) as { divergences: { executionId: string; kind: string; reason: string }[] };
      expect(all.divergences.filter((d) => d.executionId === id)).toEqual([expect.objectContaining({ kind: 'unreadable', reason })]);
      for (const args of [['inspect', id], ['inspect', id, '--file', file], ['events', id]]) {
        const r = await baton(args);
        expect(r.code, args.join(' ')).toBe(1);
        expect(r.stderr, args.join(' ')).toBe(`baton: execution ${id}: the event at revision 1 (SchedulingStarted) was ${reason}\n`);
      }
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});

/** A hash of every row of every table Baton has: events, read model, checkpoints, queue. */
async function fingerprint(): Promise<Record<string, string>> {
  const tables = await db().pool.query<{ name: string }>(
    `SELECT format('%I.%I', table_schema, table_name) AS name FROM information_schema.tables
      WHERE table_schema NOT IN ('pg_catalog', 'information_schema') AND table_type = 'BASE TABLE' ORDER BY 1`,
  );
  expect(tables.rows.map((t) => t.name)).toEqual(expect.arrayContaining(['public.baton_events', 'baton_read.executions']));
  const out: Record<string, string> = {};
  for (const { name } of tables.rows) {
    const r = await db().pool.query<{ h: string }>(`SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) AS h, count(*) AS n FROM ${name} t`);
    out[name] = r.rows[0]!.h;
  }
  return out;
}
