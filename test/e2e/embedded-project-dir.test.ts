// The embedded default's data dir as a project sees it (real processes, one embedded Postgres
// created once): a command run in a subdirectory finds the project's `.baton` above it, as git finds
// `.git`, instead of starting an empty cluster of its own there; `baton dev` says which data dir it
// uses; and a copied data dir (`cp -a devB/.baton devC/`) is another installation, with a NATS
// stream of its own, although its database has the same name.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { connect } from 'nats';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { reapAbandonedEmbeddedPostgres, EMBEDDED_PG_PASSWORD } from '../../src/db/embedded.ts';
import { deleteNatsWorkStreams } from '../../src/transport/nats/index.ts';
import { natsNamesOfInstallation } from '../../src/transport/nats/installation-names.ts';
import { batonProcesses, type BatonProcess } from '../support/baton-processes.ts';
import { runBaton } from '../support/cli.ts';

const natsUrl = inject('natsUrl');
// No BATON_DATABASE_URL and no BATON_DATA_DIR: the embedded default, found from the working directory.
const NO_DATA_SETTINGS = { BATON_DATABASE_URL: '', BATON_DATA_DIR: '' };
const { start, killAll } = batonProcesses(() => ({ ...NO_DATA_SETTINGS, BATON_NATS_URL: '', BATON_SHUTDOWN_TIMEOUT: '2s' }));
const BANNER = /Ctrl-C drains and stops\./;
const STARTUP_MS = 90_000; // initdb on a loaded 2-core machine

let project: string; // holds the one cluster every test here uses (initdb once)
let copy: string;
const installations = new Set<string>();

beforeAll(async () => {
  // The test run's sweep knows the prefix; as root the server runs as `postgres`, which must enter it.
  project = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'baton-test-pg-project-')));
  copy = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'baton-test-pg-copy-')));
  for (const d of [project, copy]) await fs.chmod(d, 0o755);
  await fs.mkdir(path.join(project, 'sub', 'deeper'), { recursive: true });
});
afterAll(async () => {
  await killAll();
  for (const dir of [project, copy]) {
    await reapAbandonedEmbeddedPostgres(path.join(dir, '.baton')); // a server whose dev a failing test killed
    await fs.rm(dir, { recursive: true, force: true });
  }
  if (natsUrl && installations.size > 0) {
    const nc = await connect({ servers: natsUrl });
    for (const id of installations) await deleteNatsWorkStreams(nc, natsNamesOfInstallation(id));
    await nc.close();
  }
});

function dev(name: string, cwd: string, args: string[] = [], env: Record<string, string> = {}): BatonProcess {
  return start(name, ['dev', '--workers', '1', '--port', '0', '--metrics-port', '0', ...args], { cwd, group: true, env });
}
const ctrlC = async (p: BatonProcess) => {
  process.kill(-p.proc.pid!, 'SIGINT');
  expect(await p.exitWithin(20_000)).toBe(0);
};
const cli = (cwd: string, args: string[]) => runBaton(args, { databaseUrl: null, cwd, env: { ...NO_DATA_SETTINGS, BATON_NATS_URL: '' } });
const exists = (p: string) => fs.access(p).then(() => true, () => false);

/** The installation row of the embedded database a dev's banner names. */
async function installationOf(p: BatonProcess): Promise<{ id: string; data_dir: string }> {
  const port = p.output.join('').match(/database\s+postgres:\/\/\S+@127\.0\.0\.1:(\d+)\/baton/)![1];
  const client = new pg.Client({ connectionString: `postgres://postgres:${EMBEDDED_PG_PASSWORD}@127.0.0.1:${port}/baton` });
  await client.connect();
  try {
    return (await client.query<{ id: string; data_dir: string }>("SELECT id::text AS id, to_jsonb(i) ->> 'data_dir' AS data_dir FROM baton_installation i")).rows[0]!;
  } finally {
    await client.end();
  }
}

describe('the embedded default in a project', () => {
  afterEach(killAll); // a failed test's devs must not hold the project for the next (the next start adopts the server)

  it('a command run in a subdirectory uses the project\'s .baton; a baton dev there is the project\'s, and says so', async () => {
    const first = dev('dev (project)', project);
    await first.waitFor(BANNER, STARTUP_MS);

    const submitted = await cli(project, ['submit', 'core.echo', '--input', '{"n":1}', '--wait']);
    expect(submitted.code, submitted.stderr).toBe(0);
    const id = submitted.stderr.match(/submitted (\S+); waiting/)![1]!;
    // From below the project: the same database, not a new empty cluster in the subdirectory.
    const listed = await cli(path.join(project, 'sub'), ['list']);
    expect(listed.stdout, listed.stderr).toContain(id);
    const deeper = await cli(path.join(project, 'sub', 'deeper'), ['submit', 'core.echo', '--input', '{"n":2}', '--wait']);
    expect(deeper.code, deeper.stderr).toBe(0);
    expect(await exists(path.join(project, 'sub', '.baton'))).toBe(false);
    expect(await exists(path.join(project, 'sub', 'deeper', '.baton'))).toBe(false);
    expect(first.output.join('')).toMatch(new RegExp(`^  data dir  ${path.join(project, '.baton')}$`, 'm')); // its own: no note

    // One baton dev per project: a second one started in a subdirectory is refused, naming the project's data dir.
    const second = dev('dev (subdirectory, while the first runs)', path.join(project, 'sub'));
    expect(await second.exitWithin(30_000)).toBe(1);
    expect(second.output.join('')).toMatch(new RegExp(`^baton: baton dev is already running in ${path.join(project, '.baton')} \\(pid ${first.proc.pid}\\)`, 'm'));
    await ctrlC(first);

    // Started in the subdirectory while none runs: the project's data dir, named as found above.
    const below = dev('dev (subdirectory)', path.join(project, 'sub'));
    await below.waitFor(BANNER, STARTUP_MS);
    expect(below.output.join('')).toMatch(new RegExp(`^  data dir  ${path.join(project, '.baton')} \\(the project's, found above the working directory`, 'm'));
    expect((await cli(path.join(project, 'sub', 'deeper'), ['status', id])).stdout).toMatch(/Completed/);
    await ctrlC(below);
    expect(await exists(path.join(project, 'sub', '.baton'))).toBe(false);
  }, 300_000);

  it.skipIf(!natsUrl)('a copied data dir is another installation: its own NATS stream, though its database has the same name', async () => {
    // The project's cluster exists (the test above, or this one's first start creates it); copy it stopped.
    const nats = { BATON_NATS_URL: natsUrl!, BATON_EAGER_DISPATCH: 'off' };
    const original = dev('dev B', project, ['--transport', 'nats'], nats);
    await original.waitFor(BANNER, STARTUP_MS);
    await ctrlC(original);
    // `cp -a`, as a person copies it: owners and modes kept (as root the cluster belongs to `postgres`).
    execFileSync('cp', ['-a', path.join(project, '.baton'), path.join(copy, '.baton')]);

    const b = dev('dev B (again)', project, ['--transport', 'nats'], nats);
    await b.waitFor(BANNER, STARTUP_MS);
    const c = dev('dev C (the copy)', copy, ['--transport', 'nats'], nats);
    await c.waitFor(BANNER, STARTUP_MS);
    const [ib, ic] = [await installationOf(b), await installationOf(c)];
    for (const i of [ib, ic]) installations.add(i.id);
    expect(ic.id).not.toBe(ib.id);
    expect(ib.data_dir).toBe(path.join(project, '.baton', 'postgres'));
    expect(ic.data_dir).toBe(path.join(copy, '.baton', 'postgres'));
    // Each one's work runs on its own worker, at its first attempt.
    for (const dir of [project, copy]) {
      const r = await runBaton(['submit', 'core.echo', '--input', '{}', '--wait'], { databaseUrl: null, cwd: dir, env: { ...NO_DATA_SETTINGS, ...nats } });
      expect(r.code, r.stderr).toBe(0);
    }
    await Promise.all([ctrlC(b), ctrlC(c)]);
  }, 300_000);
});
