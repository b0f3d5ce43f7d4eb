// The embedded default: one cluster per data dir, joined by later processes, surviving a crash.
// Runs as whatever user runs the tests, so on CI (root) it covers the run-as-`postgres` path.
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { EmbeddedPostgresError, startEmbeddedPostgres, type EmbeddedPostgres, type EmbeddedPostgresOptions } from '../../src/db/embedded.ts';
import { silentLogger } from '../../src/log.ts';
import { freePort } from '../support/free-port.ts';

let dataDir: string;
const started: EmbeddedPostgres[] = [];

beforeAll(async () => {
  dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-test-pg-embedded-test-'));
  await fs.chmod(dataDir, 0o755); // as root the server runs as `postgres`, which must enter it
});
afterAll(async () => {
  await Promise.all(started.map((h) => h.stop()));
  await fs.rm(dataDir, { recursive: true, force: true });
});

async function start(port: number, more: Partial<EmbeddedPostgresOptions> = {}): Promise<EmbeddedPostgres> {
  const h = await startEmbeddedPostgres({ dataDir, port, log: silentLogger(), ephemeral: true, ...more });
  started.push(h);
  return h;
}

async function query(url: string, sql: string): Promise<Record<string, unknown>[]> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return (await client.query(sql)).rows;
  } finally {
    await client.end();
  }
}

const reachable = (url: string) => query(url, 'SELECT 1').then(() => true, () => false);

const postmasterPid = async () => Number((await fs.readFile(path.join(dataDir, 'postgres', 'postmaster.pid'), 'utf8')).split('\n')[0]);

async function waitUntilGone(pid: number): Promise<void> {
  for (;;) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('embedded Postgres', () => {
  it('creates the cluster on first use, serves the baton database, and a second start joins it', async () => {
    const owner = await start(await freePort());
    expect(owner.owned).toBe(true);
    expect(owner.url).toMatch(/^postgres:\/\/postgres:baton@127\.0\.0\.1:\d+\/baton$/);
    expect(await query(owner.url, 'SELECT current_database() AS db')).toEqual([{ db: 'baton' }]);

    // Another baton process (or this one again) joins instead of starting a second server,
    // whatever port it was configured with.
    const guest = await start(await freePort());
    expect(guest.owned).toBe(false);
    expect(guest.port).toBe(owner.port);
    await guest.stop();
    expect(await reachable(owner.url)).toBe(true); // only the owner stops the server

    await owner.stop();
    expect(await reachable(owner.url)).toBe(false);
  });

  it('starts again after the server was SIGKILLed, even when its pid now belongs to another process', async () => {
    const first = await start(await freePort());
    const pid = await postmasterPid();
    process.kill(pid, 'SIGKILL');
    await waitUntilGone(pid);
    // Simulate pid reuse: the stale postmaster.pid now names a live, unrelated process,
    // which on its own makes Postgres refuse to start ("lock file already exists").
    const stranger = spawn('sleep', ['30'], { stdio: 'ignore' });
    try {
      const file = path.join(dataDir, 'postgres', 'postmaster.pid');
      const lines = (await fs.readFile(file, 'utf8')).split('\n');
      lines[0] = String(stranger.pid);
      await fs.writeFile(file, lines.join('\n'));

      const second = await start(first.port);
      expect(second.owned).toBe(true);
      expect(await query(second.url, 'SELECT 1 AS ok')).toEqual([{ ok: 1 }]);
      await second.stop();
      await first.stop(); // its server is long gone: must not hang
    } finally {
      stranger.kill();
    }
  });

  it('adopts a server whose owning process died, and stops it', async () => {
    const lost = await start(await freePort());
    // Pretend its owner was SIGKILLed: record an owner pid that no longer exists.
    const dead = spawn('true', { stdio: 'ignore' });
    await new Promise((r) => dead.once('exit', r));
    await fs.writeFile(path.join(dataDir, 'postgres.owner.json'), JSON.stringify({ pid: dead.pid, startTime: '1' }));

    const adopter = await start(await freePort());
    expect(adopter.owned).toBe(true);
    expect(adopter.port).toBe(lost.port);
    await adopter.stop();
    expect(await reachable(adopter.url)).toBe(false);
    await lost.stop();
  });

  it('names BATON_EMBEDDED_PG_PORT when the port is taken by another program', async () => {
    const squatter = net.createServer().listen(0, '127.0.0.1');
    await new Promise((r) => squatter.once('listening', r));
    try {
      const port = (squatter.address() as net.AddressInfo).port;
      const err = await start(port).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(EmbeddedPostgresError);
      expect((err as Error).message).toMatch(new RegExp(`on BATON_EMBEDDED_PG_PORT=${port}: 127\\.0\\.0\\.1:${port} is already in use.*or unset it`));
      // Refused before initdb: a new data dir gets no cluster it would then have to clean up.
      const fresh = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-test-pg-refused-'));
      try {
        await expect(startEmbeddedPostgres({ dataDir: fresh, port, log: silentLogger(), ephemeral: true })).rejects.toBeInstanceOf(EmbeddedPostgresError);
        expect(await fs.readdir(fresh)).toEqual([]);
      } finally {
        await fs.rm(fresh, { recursive: true, force: true });
      }
    } finally {
      squatter.close();
    }
  });

  it('moves off a taken default port by itself, and guests find the server there', async () => {
    const squatter = net.createServer().listen(0, '127.0.0.1');
    await new Promise((r) => squatter.once('listening', r));
    try {
      const port = (squatter.address() as net.AddressInfo).port;
      const owner = await start(port, { portIsDefault: true });
      expect(owner.owned).toBe(true);
      expect(owner.port).not.toBe(port);
      expect(await query(owner.url, 'SELECT 1 AS ok')).toEqual([{ ok: 1 }]);
      const guest = await start(port, { portIsDefault: true }); // a CLI command configured with the same default
      expect(guest.owned).toBe(false);
      expect(guest.port).toBe(owner.port);
      await guest.stop();
      await owner.stop();
    } finally {
      squatter.close();
    }
  });

  it('runs the server in a process group of its own, so a terminal\'s Ctrl-C to ours does not reach it', async () => {
    const owner = await start(await freePort());
    try {
      const pgid = async (pid: number) => {
        const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
      };
      const server = await postmasterPid();
      expect(await pgid(server)).toBe(server); // it leads its own group
      expect(await pgid(server)).not.toBe(await pgid(process.pid));
    } finally {
      await owner.stop();
    }
  });
});

// Root working in /root: the `postgres` user the server must run as cannot enter the project.
describe.runIf(process.getuid?.() === 0)('embedded Postgres as root, in a project the postgres user cannot enter', () => {
  let project: string;
  let clusters: string;
  beforeAll(async () => {
    // The project is the data dir here, so a killed run's server is swept like the others'.
    project = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-test-pg-private-project-'));
    await fs.chmod(project, 0o700); // like /root
    clusters = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-test-root-clusters-'));
    await fs.chmod(clusters, 0o755);
  });
  afterAll(async () => {
    await fs.rm(project, { recursive: true, force: true });
    await fs.rm(clusters, { recursive: true, force: true });
  });

  it('keeps the cluster where that user can reach it, says where, and every process of the project finds it', async () => {
    const lines: { msg: string; clusterDir?: string }[] = [];
    const log = pino(new Writable({ write: (c: Buffer, _e, done) => (lines.push(JSON.parse(c.toString())), done()) }));
    const options = { dataDir: project, port: await freePort(), ephemeral: true, rootClustersDir: clusters };
    const owner = await startEmbeddedPostgres({ ...options, log });
    try {
      expect(owner.owned).toBe(true);
      expect(owner.clusterDir.startsWith(`${clusters}/`)).toBe(true);
      expect(owner.clusterDir).toMatch(/\/[0-9a-f]{16}\/postgres$/);
      expect(await query(owner.url, 'SELECT 1 AS ok')).toEqual([{ ok: 1 }]);
      expect(lines.find((l) => l.clusterDir === owner.clusterDir)?.msg).toMatch(
        new RegExp(`runs as the "postgres" user, which cannot enter ${project}: its data lives in ${owner.clusterDir}`),
      );
      await expect(fs.access(path.join(project, 'postgres'))).rejects.toThrow();

      // A CLI command run in the same project joins that server.
      const guest = await startEmbeddedPostgres({ ...options, port: await freePort(), log: silentLogger() });
      expect(guest.owned).toBe(false);
      expect(guest.port).toBe(owner.port);
      await guest.stop();
    } finally {
      await owner.stop();
    }
    // And the next start finds the same cluster again.
    const again = await startEmbeddedPostgres({ ...options, log: silentLogger() });
    expect(again.clusterDir).toBe(owner.clusterDir);
    await again.stop();
  });
});
