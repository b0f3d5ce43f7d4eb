// How the command line starts: bin/baton.js runs the compiled dist/ when it is up to date with
// the sources and the TypeScript sources (through tsx) otherwise, saying so; `--version`; CLI
// commands keep info logs off stderr; `bench eventstore --json` prints JSON.
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { urlForDatabase } from '../../src/db/connect.ts';
import { runBaton, SOURCE_NOTE } from '../support/cli.ts';
import { useTestDatabase } from '../support/test-db.ts';

const run = promisify(execFile);
const ROOT = path.resolve('.');
const { version } = JSON.parse(await fs.readFile(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };

describe('bin/baton.js: compiled or from source', () => {
  // A copy of the package: its bin/ and sources, the real node_modules linked in, and a
  // stand-in dist/ whose main.js only says it ran, so the choice is visible and quick.
  let copy: string;
  const baton = async (...args: string[]) => {
    const { BATON_DATABASE_URL: _u, ...env } = process.env;
    return run(process.execPath, [path.join(copy, 'bin/baton.js'), ...args], { cwd: copy, env, timeout: 60_000 });
  };
  const writeStamp = (startedAt: number) => fs.writeFile(path.join(copy, 'dist/.build-stamp.json'), JSON.stringify({ startedAt }));
  const past = new Date(Date.now() - 3_600_000);

  beforeAll(async () => {
    copy = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-bin-'));
    for (const entry of ['bin', 'src', 'actors', 'projections', 'schemas', 'package.json', 'tsconfig.json', 'tsconfig.build.json']) {
      await fs.cp(path.join(ROOT, entry), path.join(copy, entry), { recursive: true });
    }
    await fs.symlink(path.join(ROOT, 'node_modules'), path.join(copy, 'node_modules'));
    // Every copied file as old as an hour ago: the build below is newer than all of them.
    const files = (await fs.readdir(copy, { recursive: true, withFileTypes: true })).filter((e) => e.isFile());
    await Promise.all(files.map((e) => fs.utimes(path.join(e.parentPath, e.name), past, past)));
    await fs.mkdir(path.join(copy, 'dist/src/cli'), { recursive: true });
    await fs.writeFile(path.join(copy, 'dist/src/cli/main.js'), "console.log('compiled main ran');\n");
  });
  afterAll(async () => {
    if (copy) await fs.rm(copy, { recursive: true, force: true });
  });

  it('runs dist/ when the last build started after every source changed, and says nothing', async () => {
    await writeStamp(Date.now());
    const r = await baton('--version');
    expect(r.stdout).toBe('compiled main ran\n');
    expect(r.stderr).toBe('');
  });

  it('runs the sources through tsx once a source is newer than the build, saying which and how to rebuild', async () => {
    await writeStamp(past.getTime() + 60_000);
    const edited = path.join(copy, 'src/cli/format.ts');
    await fs.utimes(edited, new Date(), new Date());
    const r = await baton('--version');
    expect(r.stdout).toBe(`${version}\n`); // the real main.ts, from the sources
    expect(r.stderr).toMatch(SOURCE_NOTE);
    expect(r.stderr).toBe('baton: running from the TypeScript sources (slower start): src/cli/format.ts changed after the last build; `npm run build` compiles them to dist/\n');
    await fs.utimes(edited, past, past);
  });

  it('says so once for `baton bench`, which runs itself again with the deployed Node flags (the child said it too)', async () => {
    await writeStamp(past.getTime() + 60_000);
    const edited = path.join(copy, 'src/cli/format.ts');
    await fs.utimes(edited, new Date(), new Date());
    try {
      // A setting the child refuses as it reads its configuration (the parent reads none before
      // it starts the child): the child exits at once, and no benchmark runs.
      const { BATON_DATABASE_URL: _u, ...env } = process.env;
      const r = await run(process.execPath, [path.join(copy, 'bin/baton.js'), 'bench', '--executions', '1'], { cwd: copy, env: { ...env, BATON_LOG_LEVEL: 'loud' }, timeout: 60_000 }).then(
        () => ({ stderr: '', ok: true }),
        (e: { stderr: string }) => ({ stderr: e.stderr, ok: false }),
      );
      expect(r.ok).toBe(false);
      expect(r.stderr.match(/^baton: running from the TypeScript sources/gm), r.stderr).toHaveLength(1);
      // The child's refusal, naming only the bad setting (bin/baton.js's own variable is not refused).
      expect(r.stderr).toMatch(/^baton: invalid configuration: BATON_LOG_LEVEL: /m);
      expect(r.stderr).not.toMatch(/BATON_SOURCES_NOTICE_SHOWN/);
    } finally {
      await fs.utimes(edited, past, past);
    }
    // The decision, as bin/baton.js makes it.
    const { sourcesNotice, SOURCES_NOTICE_SHOWN } = await import('../../bin/dist-freshness.js');
    expect(sourcesNotice({ fresh: false, reason: 'there is no build in dist/' }, {})).toMatch(SOURCE_NOTE);
    expect(sourcesNotice({ fresh: false, reason: 'there is no build in dist/' }, { [SOURCES_NOTICE_SHOWN]: '1' })).toBe('');
    expect(sourcesNotice({ fresh: true }, {})).toBe('');
  });

  it('treats a changed tsconfig, a missing stamp or a missing main.js as no usable build', async () => {
    await writeStamp(past.getTime() + 60_000);
    await fs.utimes(path.join(copy, 'tsconfig.build.json'), new Date(), new Date());
    expect((await baton('--version')).stderr).toMatch(/: tsconfig\.build\.json changed after the last build;/);
    await fs.utimes(path.join(copy, 'tsconfig.build.json'), past, past);
    expect((await baton('--version')).stdout).toBe('compiled main ran\n');

    await fs.rm(path.join(copy, 'dist/.build-stamp.json'));
    const unbuilt = await baton('--version');
    expect(unbuilt.stdout).toBe(`${version}\n`);
    expect(unbuilt.stderr).toMatch(/: there is no build in dist\/;/);

    await writeStamp(Date.now());
    await fs.rename(path.join(copy, 'dist/src/cli/main.js'), path.join(copy, 'dist/src/cli/main.js.moved'));
    expect((await baton('--version')).stderr).toMatch(/: the build in dist\/ is incomplete;/);
    await fs.rename(path.join(copy, 'dist/src/cli/main.js.moved'), path.join(copy, 'dist/src/cli/main.js'));
  });
});

describe('the command line', () => {
  const db = useTestDatabase();

  it('--version and -V print package.json\'s version', async () => {
    for (const flag of ['--version', '-V']) {
      const r = await runBaton([flag], { databaseUrl: null });
      expect(r).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' });
    }
  });

  it('keeps info logs off stderr: a first command on a fresh database migrates it quietly', async () => {
    // A database nobody migrated: the first command applies every migration, which the hosts
    // log at info. A command logs at warn unless BATON_LOG_LEVEL says otherwise.
    const admin = new pg.Client({ connectionString: inject('pgBaseUrl') });
    await admin.connect();
    const name = `baton_test_${inject('pgRunId')}_fresh_${process.pid}`;
    await admin.query(`CREATE DATABASE ${admin.escapeIdentifier(name)}`);
    try {
      const url = urlForDatabase(inject('pgBaseUrl'), name);
      const id = '00000000-0000-4000-8000-000000000001';
      const quiet = await runBaton(['status', id], { databaseUrl: url, env: { BATON_LOG_LEVEL: '' } });
      expect(quiet.code).toBe(1);
      expect(quiet.stderr).toBe(`baton: execution ${id} not found\n`);
      const check = new pg.Client({ connectionString: url });
      await check.connect();
      const migrations = (await check.query('SELECT count(*)::int AS n FROM baton_schema_migrations')).rows[0].n as number;
      await check.end();
      expect(migrations).toBeGreaterThan(0);
      // The level is still the user's to choose.
      const verbose = await runBaton(['status', id], { databaseUrl: url, env: { BATON_LOG_LEVEL: 'debug' } });
      expect(verbose.stderr).toMatch(/"msg":"event store: Postgres"/);
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS ${admin.escapeIdentifier(name)} WITH (FORCE)`);
      await admin.end();
    }
  });

  it('a command\'s log lines name it as their component, once (`cli/status`, `cli/dlq/list`), as a host\'s name the host', async () => {
    const id = '00000000-0000-4000-8000-000000000002';
    for (const [args, component] of [
      [['status', id], 'cli/status'],
      [['retention', 'run', '--older-than', '1s', '--dry-run'], 'cli/retention/run'],
      // Its transport's logger was a component logger of its own ("dlq"): now the command's, not both.
      [['dlq', 'list'], 'cli/dlq/list'],
    ] as const) {
      const r = await runBaton([...args], { databaseUrl: db().url, env: { BATON_LOG_LEVEL: 'debug' } });
      const lines = r.stderr.split('\n').filter((l) => l.startsWith('{'));
      expect(lines.length, `${args.join(' ')}: ${r.stderr}`).toBeGreaterThan(0);
      for (const line of lines) {
        expect(line.match(/"component":/g), line).toHaveLength(1); // a JSON parser keeps only the last of two
        expect(JSON.parse(line), line).toMatchObject({ component });
      }
    }
  });

  it('`bench` runs the projector in a `baton projector` process of its own, which it stops', async () => {
    const r = await runBaton(['bench', '--executions', '60', '--latency-samples', '3', '--concurrency', '6', '--workers', '1', '--json'], { databaseUrl: db().url });
    expect(r.code, r.stderr).toBe(0);
    const result = JSON.parse(r.stdout) as {
      projector: string;
      nodeFlags: string[];
      executions: number;
      executionsPerSec: number;
      pickupMs: { samples: number };
      projectionLagMs: { samples: number };
      cpuPerExecution: { thisProcessUs: number; projectorUs: number; restUs: number; totalUs: number };
    };
    // Eager dispatch on by default, as in `baton dev`: every run (60 and 3 pickup samples) started in its handoff's append.
    expect(result).toMatchObject({ projector: 'process', executions: 60, pickupMs: { samples: 3 }, eagerDispatch: { on: true, runsStartedWithHandoff: 63, runs: 63 } });
    expect(result.executionsPerSec).toBeGreaterThan(0);
    // Started without a young-generation flag, the bench ran itself again in Node as the image runs hosts.
    expect(result.nodeFlags).toEqual(['--max-semi-space-size=64']);
    // The lag sampler read the checkpoints the projector process moved.
    expect(result.projectionLagMs.samples).toBeGreaterThan(0);
    // Where the throughput run's CPU went, from /proc (the other processes' in 10 ms ticks, so a run
    // this short may show 0 for them): this process worked, and each process has its figure.
    const cpu = result.cpuPerExecution;
    expect(cpu.thisProcessUs).toBeGreaterThan(0);
    for (const us of [cpu.projectorUs, cpu.restUs, cpu.totalUs]) expect(us).toBeGreaterThanOrEqual(0);
    const { stdout } = await run('ps', ['-eo', 'args']);
    expect(stdout).not.toMatch(/baton\.js projector --metrics-port 0/);
  }, 120_000);

  it('`bench --history N` runs on a store already holding N finished executions, projected, and runs only its own (with --input-bytes, inputs of that size)', async () => {
    const r = await runBaton(['bench', '--history', '300', '--executions', '40', '--latency-samples', '2', '--concurrency', '4', '--workers', '1', '--input-bytes', '600', '--json'], { databaseUrl: db().url });
    expect(r.code, r.stderr).toBe(0);
    const result = JSON.parse(r.stdout) as { history: { executions: number; events: number; hostsFollowedAfter: string }; executions: number; inputBytes: number; eagerDispatch: { runs: number } };
    expect(result.inputBytes).toBeGreaterThan(550);
    expect(result.inputBytes).toBeLessThan(650);
    // Five events per seeded history, all stored and projected before the measured phases; the
    // hosts started after the last of them (the read model's checkpoint), not from position 0.
    expect(result.history).toEqual({ executions: 300, events: 1_500, hostsFollowedAfter: '1500' });
    // Only the run's own executions ran: none of the finished ones again.
    expect(result).toMatchObject({ executions: 40, eagerDispatch: { runs: 42 } });
    expect(r.stderr).toContain('[history] storing 300 finished executions (5 events each)');
    const refused = await runBaton(['bench', '--history', 'lots'], { databaseUrl: db().url });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/--history <n>.*'lots' is invalid. must be an integer from 0 to 10000000/);
    const tooLarge = await runBaton(['bench', '--input-bytes', '100001'], { databaseUrl: db().url });
    expect(tooLarge.code).not.toBe(0);
    expect(tooLarge.stderr).toMatch(/--input-bytes <n>.*'100001' is invalid. must be an integer from 0 to 100000/);
  }, 120_000);

  /** A `baton bench` of a million executions, once it has reached its throughput phase. */
  async function benchInThroughputPhase(args: string[], env: Record<string, string> = {}) {
    const { spawn } = await import('node:child_process');
    const { BATON_DATABASE_URL: _url, ...rest } = process.env;
    const child = spawn(process.execPath, [path.join(ROOT, 'bin/baton.js'), 'bench', ...args, '--executions', '1000000', '--latency-samples', '1'], {
      env: { ...rest, BATON_LOG_LEVEL: 'warn', BATON_DATABASE_URL: db().url, ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => void (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    for (const deadline = Date.now() + 60_000; !stderr.includes('[2/2]'); ) {
      if (Date.now() > deadline) throw new Error(`the bench did not reach its throughput phase: ${stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    return { child, exited, stderr: () => stderr };
  }

  it('`bench` stopped by Ctrl-C or SIGTERM leaves no projector process and no scratch database behind', async () => {
    const scratch = async () => (await db().pool.query<{ datname: string }>("SELECT datname FROM pg_database WHERE datname LIKE 'baton_bench_%'")).rows.map((r) => r.datname).sort();
    const projectors = async () => (await run('ps', ['-eo', 'args'])).stdout.split('\n').filter((l) => /baton\.js projector --metrics-port 0/.test(l));
    const before = await scratch();
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      // Interrupted mid-run: its projector started, its database made, its throughput phase going.
      const bench = await benchInThroughputPhase([]);
      expect((await scratch()).length).toBeGreaterThan(before.length);
      bench.child.kill(signal);
      expect(await bench.exited, bench.stderr()).toBe(signal === 'SIGINT' ? 130 : 143);
      expect(bench.stderr()).toContain(`baton bench: ${signal}: removing what the benchmark made (scratch database, projector process) …`);
      expect(await scratch()).toEqual(before);
      expect(await projectors()).toEqual([]);
    }
  }, 180_000);

  it('`bench --transport nats` deletes the JetStream streams it made, as it drops its scratch database', async () => {
    const natsUrl = inject('natsUrl');
    if (!natsUrl) throw new Error('this test needs NATS (BATON_NATS_URL)');
    const { connect } = await import('nats');
    const nc = await connect({ servers: natsUrl });
    try {
      const jsm = await nc.jetstreamManager();
      const benchStreams = async () => (await jsm.streams.names().next()).filter((n) => n.startsWith('BATON_BENCH_'));
      const before = new Set(await benchStreams());
      // Eager dispatch off: every run through JetStream.
      const r = await runBaton(['bench', '--transport', 'nats', '--eager-dispatch', 'off', '--executions', '20', '--latency-samples', '2', '--concurrency', '4', '--workers', '1', '--json'], { databaseUrl: db().url, env: { BATON_NATS_URL: natsUrl } });
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ transport: 'NATS JetStream', eagerDispatch: { on: false, runsStartedWithHandoff: 0, runs: 22 } });
      expect((await benchStreams()).filter((n) => !before.has(n))).toEqual([]);

      // Interrupted while its workers pull from them: they must not provision the streams again
      // as they are deleted (both were left behind this way).
      const bench = await benchInThroughputPhase(['--transport', 'nats', '--eager-dispatch', 'off'], { BATON_NATS_URL: natsUrl });
      expect((await benchStreams()).filter((n) => !before.has(n)).length).toBeGreaterThan(0);
      bench.child.kill('SIGTERM');
      expect(await bench.exited, bench.stderr()).toBe(143);
      expect((await benchStreams()).filter((n) => !before.has(n))).toEqual([]);
    } finally {
      await nc.close();
    }
  }, 120_000);

  it('`bench --transport nats` without BATON_NATS_URL says what to set, before it makes a scratch database', async () => {
    const r = await runBaton(['bench', '--transport', 'nats', '--executions', '10'], { databaseUrl: db().url, env: { BATON_NATS_URL: '' } });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^baton: --transport nats needs BATON_NATS_URL/m);
    expect(r.stderr).not.toMatch(/\n\s+at /); // a message, not a stack trace
  }, 60_000);

  it('`bench eventstore --streams` and `bench submit --in-flight` past what the server can ever give are refused naming the option, before a scratch database is made', async () => {
    const { rows } = await db().pool.query<{ allowed: number }>("SELECT current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int AS allowed");
    const allowed = rows[0]!.allowed;
    const scratch = async () => (await db().pool.query("SELECT count(*)::int AS n FROM pg_database WHERE datname LIKE 'baton_bench_%'")).rows[0].n as number;
    const before = await scratch();
    if (allowed >= 262) throw new Error(`this server allows ${allowed} connections: the test needs one that allows fewer than 262`);
    const streams = await runBaton(['bench', 'eventstore', '--streams', '256', '--seconds', '1'], { databaseUrl: db().url });
    expect(streams.code).toBe(1);
    expect(streams.stderr).toMatch(new RegExp(`^baton: --streams 256 needs 262 connections to Postgres at once; this server allows ${allowed} \\(max_connections \\d+, less \\d+ for superusers\\): give a smaller --streams$`, 'm'));
    const inFlight = await runBaton(['bench', 'submit', '--in-flight', '256', '--seconds', '1'], { databaseUrl: db().url });
    expect(inFlight.code).toBe(1);
    expect(inFlight.stderr).toMatch(/^baton: --in-flight 256 needs 264 connections to Postgres at once; .*give a smaller --in-flight$/m);
    expect(await scratch()).toBe(before);
  }, 60_000);

  it('`bench eventstore --json` prints JSON (the option is the subcommand\'s, not `bench`\'s)', async () => {
    // Four streams: the default 64 would take 70 connections of a server other test files share.
    const r = await runBaton(['bench', 'eventstore', '--seconds', '1', '--large-history', '1000', '--streams', '4', '--json'], { databaseUrl: db().url });
    expect(r.code, r.stderr).toBe(0);
    const result = JSON.parse(r.stdout) as { seconds: number; appends: { phase: string; appendsPerSec: number }[]; rehydrate: { events: number }[] };
    expect(result.seconds).toBe(1);
    // 1 and --streams appenders, each with one statement per append and with group commit; then
    // batches through the committer, and appendMany.
    expect(result.appends.map((a) => a.phase)).toEqual([
      '1 appender, one statement per append',
      '1 appender, group commit',
      '4 appenders, one statement per append',
      '4 appenders, group commit',
      '4 appenders, batches of 6, group commit',
      'appendMany of 256 streams',
    ]);
    for (const a of result.appends) expect(a.appendsPerSec).toBeGreaterThan(0);
    expect(result.rehydrate.map((h) => h.events)).toEqual([1_000, 1_000]);
  }, 60_000);
});
