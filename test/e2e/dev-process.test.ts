// `baton dev` as a person runs it (real processes, each its own embedded Postgres in a temp
// dir): Ctrl-C in its terminal — SIGINT to the whole foreground process group — drains and
// stops it, Postgres last; a second Ctrl-C exits at once; a dead database does not hold the
// drain for good; a second `baton dev` in one directory is refused, in another it runs beside
// the first; and an owner killed outright leaves a server the next start adopts.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { reapAbandonedEmbeddedPostgres } from '../../src/db/embedded.ts';
import { isAlive } from '../../src/process/identity.ts';
import { batonProcesses, type BatonProcess } from '../support/baton-processes.ts';
import { runBaton } from '../support/cli.ts';
import { until as untilEvery } from '../support/until.ts';

const until = (what: string, probe: () => boolean | Promise<boolean>, ms: number) => untilEvery(what, probe, ms, { everyMs: 100 });

// No BATON_DATABASE_URL: the embedded default. Short drains, so the tests stay short.
const { start, killAll } = batonProcesses(() => ({ BATON_DATABASE_URL: '', BATON_NATS_URL: '', BATON_SHUTDOWN_TIMEOUT: '2s' }));
const dirs: string[] = [];
const BANNER = /Ctrl-C drains and stops\./;
const STARTUP_MS = 90_000; // initdb on a loaded 2-core machine

/** A fresh project directory, used as BATON_DATA_DIR (the test run's sweep knows the prefix). */
async function projectDir(): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-test-pg-dev-'));
  await fs.chmod(dir, 0o755); // as root the server runs as `postgres`, which must enter it
  dirs.push(dir);
  return dir;
}

function dev(name: string, dir: string, args: string[] = [], env: Record<string, string> = {}): BatonProcess {
  // Its own process group, like a shell's foreground job: Ctrl-C signals the whole group.
  return start(name, ['dev', '--workers', '1', ...args], { cwd: dir, group: true, env: { BATON_DATA_DIR: dir, ...env } });
}

const ctrlC = (p: BatonProcess) => process.kill(-p.proc.pid!, 'SIGINT');
const postmasterPid = async (dir: string) => Number((await fs.readFile(path.join(dir, 'postgres', 'postmaster.pid'), 'utf8')).split('\n')[0]);


/** `baton …` run in `dir` against its dev's embedded Postgres. */
const cli = (dir: string, args: string[]) => runBaton(args, { databaseUrl: null, cwd: dir, env: { BATON_DATA_DIR: dir, BATON_NATS_URL: '' } });

afterAll(async () => {
  await killAll();
  for (const dir of dirs) {
    await reapAbandonedEmbeddedPostgres(dir); // a server whose dev was killed by a failing test
    await fs.rm(dir, { recursive: true, force: true });
  }
});

describe('baton dev', () => {
  it('Ctrl-C (SIGINT to its process group) drains, stops Postgres last and exits 0 in seconds; the dir starts again', async () => {
    const dir = await projectDir();
    const first = dev('dev', dir);
    await first.waitFor(BANNER, STARTUP_MS);
    const server = await postmasterPid(dir);
    expect((await cli(dir, ['submit', 'core.noop', '--wait'])).code).toBe(0);

    const t0 = Date.now();
    ctrlC(first);
    expect(await first.exitWithin(20_000)).toBe(0);
    const took = Date.now() - t0;
    expect(took).toBeLessThan(10_000);
    // Postgres outlived the signal (its own group) until Baton had drained: no connection errors.
    expect(first.output.join('')).not.toMatch(/ECONNREFUSED|terminating connection|connection lost|shutting down/i);
    await until('the embedded Postgres to be stopped', () => !isAlive(server), 10_000);

    const again = dev('dev (again)', dir);
    await again.waitFor(BANNER, STARTUP_MS);
    expect((await cli(dir, ['submit', 'core.noop', '--wait'])).code).toBe(0);

    // Killed outright, it cannot stop its server, which lives on in its own group...
    const orphan = await postmasterPid(dir);
    again.proc.kill('SIGKILL');
    await again.exited;
    expect(isAlive(orphan)).toBe(true);
    // ...until the next baton process on the directory adopts it, and in the end stops it.
    const adopter = dev('dev (adopter)', dir);
    await adopter.waitFor(BANNER, STARTUP_MS);
    expect(adopter.output.join('')).toMatch(/adopting the embedded Postgres left running by a baton process that died/);
    expect(await postmasterPid(dir)).toBe(orphan);
    ctrlC(adopter);
    expect(await adopter.exitWithin(20_000)).toBe(0);
    await until('the adopted Postgres to be stopped', () => !isAlive(orphan), 10_000);
  }, 300_000);

  it('work submitted while a killed baton dev is down runs as its attempt 1 once the next start is up', async () => {
    const dir = await projectDir();
    const killed = dev('dev (killed)', dir);
    await killed.waitFor(BANNER, STARTUP_MS);
    killed.proc.kill('SIGKILL');
    await killed.exited;
    // Its dev-1 row still looks live: the next start's executor handed this to the dead dev-1,
    // reclaimed it when the new one announced itself, and with one attempt gave it up.
    const submitted = await cli(dir, ['submit', 'core.noop', '--max-attempts', '1']);
    expect(submitted.code, submitted.stderr).toBe(0);
    const id = submitted.stdout.match(/submitted: (\S+)/)![1]!;
    const next = dev('dev (next)', dir);
    await next.waitFor(BANNER, STARTUP_MS);
    let status = '';
    await until('it to end', async () => /Completed|Abandoned|Failed/.test((status = (await cli(dir, ['status', id])).stdout)), 30_000);
    expect(status).toMatch(/Completed/);
    expect((await cli(dir, ['events', id])).stdout).not.toMatch(/OwnershipReclaimed/);
    ctrlC(next);
    expect(await next.exitWithin(20_000)).toBe(0);
  }, 300_000);

  it('refuses a second baton dev in the same directory, leaving the first unharmed; another directory runs beside it', async () => {
    const dirA = await projectDir();
    const dirB = await projectDir();
    const a = dev('dev A', dirA);
    await a.waitFor(BANNER, STARTUP_MS);

    const a2 = dev('dev A again', dirA);
    expect(await a2.exitWithin(30_000)).toBe(1);
    expect(a2.output.join('')).toMatch(new RegExp(`^baton: baton dev is already running in ${dirA} \\(pid ${a.proc.pid}\\): .*BATON_DATA_DIR`, 'm'));
    expect(a.proc.exitCode).toBeNull();
    expect((await cli(dirA, ['submit', 'core.noop', '--wait'])).code).toBe(0);

    // Another directory: its own embedded Postgres, and free ports where A holds the defaults.
    const b = dev('dev B', dirB);
    await b.waitFor(BANNER, STARTUP_MS);
    const url = (p: BatonProcess) => p.output.join('').match(/GraphQL\s+(\S+)/)![1];
    const database = (p: BatonProcess) => p.output.join('').match(/database\s+(\S+)/)![1];
    expect(url(b)).not.toBe(url(a));
    expect(database(b)).not.toBe(database(a));
    expect((await cli(dirB, ['submit', 'core.noop', '--wait'])).code).toBe(0);
    expect((await cli(dirA, ['submit', 'core.noop', '--wait'])).code).toBe(0);
    // Each has its own worker dev-1, in its own database: no collision.
    expect(a.output.join('')).toMatch(/workers\s+dev-1 /);
    expect(b.output.join('')).toMatch(/workers\s+dev-1 /);

    ctrlC(a);
    ctrlC(b);
    expect(await a.exitWithin(20_000)).toBe(0);
    expect(await b.exitWithin(20_000)).toBe(0);
  }, 300_000);

  it('a second Ctrl-C exits at once, saying so; a drain whose database is gone gives up in bounded time', async () => {
    const dir = await projectDir();
    const stuck = dev('dev (second Ctrl-C)', dir, ['--shutdown-timeout', '60000'], { BATON_LOG_LEVEL: 'info' });
    await stuck.waitFor(BANNER, STARTUP_MS);
    const server = await postmasterPid(dir);
    const submitted = await cli(dir, ['submit', 'core.sleep', '--input', '{"ms":120000}']);
    const id = submitted.stdout.match(/submitted: (\S+)/)![1]!;
    await until('the long run to start', async () => /Running/.test((await cli(dir, ['status', id])).stdout), 30_000);

    ctrlC(stuck); // the drain now waits up to 60 s for the run…
    await stuck.waitFor(/"msg":"draining"/, 10_000);
    const t0 = Date.now();
    ctrlC(stuck); // …unless asked again
    expect(await stuck.exitWithin(10_000)).toBe(1);
    expect(Date.now() - t0).toBeLessThan(3_000);
    expect(stuck.output.join('')).toMatch(/^baton: SIGINT again: exiting now, without finishing the drain$/m);
    await until('the embedded Postgres to be stopped', () => !isAlive(server), 15_000); // by the exit handler

    // The database dies under a running dev (here: killed); Ctrl-C must not wait on it for good.
    const orphaned = dev('dev (database gone)', dir);
    await orphaned.waitFor(BANNER, STARTUP_MS);
    process.kill(await postmasterPid(dir), 'SIGKILL');
    await until('the dev to notice', () => /exited unexpectedly/.test(orphaned.output.join('')), 10_000);
    const t1 = Date.now();
    ctrlC(orphaned);
    await orphaned.exitWithin(30_000);
    // Bounded by the shutdown timeout (2 s) plus the drain grace (10 s).
    expect(Date.now() - t1).toBeLessThan(15_000);
  }, 300_000);

  it('a CLI command that started the embedded Postgres itself stops it when Ctrl-C ends the command', async () => {
    const dir = await projectDir();
    // No dev running: the command starts (and owns) the server, then waits for a run no worker takes.
    const waiting = start('submit --wait', ['submit', 'core.noop', '--wait'], { cwd: dir, group: true, env: { BATON_DATA_DIR: dir } });
    await waiting.waitFor(/waiting for it to finish/, STARTUP_MS);
    const server = await postmasterPid(dir);
    ctrlC(waiting);
    await waiting.exitWithin(15_000);
    expect(waiting.proc.signalCode).toBe('SIGINT'); // it dies of the signal, as a command should
    await until('the embedded Postgres to be stopped', () => !isAlive(server), 15_000);
  }, 120_000);
});
