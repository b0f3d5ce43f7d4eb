// A private Postgres cluster that a fault scenario may kill (`pg_ctl stop -m immediate`) and
// restart at will: never the machine's shared one.
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { migrateAll } from '../../src/db/all-migrations.ts';
import { freePort } from '../support/free-port.ts';
import { makeRunDir, onExit, pgCommand, runningAsRoot, sweepAbandoned } from './run-dirs.ts';

const execFileAsync = promisify(execFile);

async function findPgBin(): Promise<string> {
  const root = '/usr/lib/postgresql';
  const versions = (await fs.readdir(root).catch(() => [] as string[])).filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a));
  for (const v of versions) {
    const bin = path.join(root, v, 'bin');
    if (existsSync(path.join(bin, 'initdb')) && existsSync(path.join(bin, 'pg_ctl'))) return bin;
  }
  throw new Error(`no PostgreSQL server binaries (initdb, pg_ctl) under ${root}/*/bin: install the postgresql server package`);
}

export class PrivatePostgres {
  private constructor(
    readonly bin: string,
    readonly dir: string,
    readonly port: number,
  ) {}

  get dataDir(): string {
    return path.join(this.dir, 'data');
  }
  url(database = 'postgres'): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${database}`;
  }

  static async start(): Promise<PrivatePostgres> {
    const bin = await findPgBin();
    sweepAbandoned(bin);
    const dir = await makeRunDir('pg');
    const port = await freePort();
    const server = new PrivatePostgres(bin, dir, port);
    const forget = onExit(() => {
      try {
        execFileSync(...pgCommand(path.join(bin, 'pg_ctl'), ['-D', server.dataDir, '-m', 'immediate', '-w', '-t', '10', 'stop']), { stdio: 'ignore' });
      } catch {
        /* not running */
      }
      rmSync(dir, { recursive: true, force: true });
    });
    server.forgetExitHook = forget;
    try {
      if (runningAsRoot) {
        await fs.chmod(dir, 0o755);
        const { stdout } = await execFileAsync('id', ['-u', 'postgres']);
        const { stdout: gid } = await execFileAsync('id', ['-g', 'postgres']);
        await fs.chown(dir, Number(stdout.trim()), Number(gid.trim()));
      }
      await server.pg('initdb', ['-D', server.dataDir, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-locale', '--no-sync'], 120_000);
      // fsync off: an immediate stop is a crash of the server, not of the machine, so every
      // write() already reached the kernel and recovery is exact. synchronous_commit stays on:
      // with it off, an acknowledged commit could be lost by `pg_ctl stop -m immediate`.
      await fs.appendFile(
        path.join(server.dataDir, 'postgresql.conf'),
        [
          '',
          '# baton fault harness',
          "listen_addresses = '127.0.0.1'",
          `port = ${port}`,
          "unix_socket_directories = ''",
          'fsync = off',
          'max_connections = 200',
          "shared_buffers = '64MB'",
          '',
        ].join('\n'),
      );
      await server.start();
    } catch (err) {
      await server.destroy();
      throw err;
    }
    return server;
  }

  private forgetExitHook: () => void = () => {};

  private async pg(tool: string, args: string[], timeoutMs: number): Promise<string> {
    try {
      const { stdout } = await execFileAsync(...pgCommand(path.join(this.bin, tool), args), { timeout: timeoutMs });
      return stdout;
    } catch (err) {
      const e = err as { stderr?: string; message: string };
      throw new Error(`${tool} ${args.join(' ')} failed: ${e.stderr || e.message}\n${await this.logTail()}`, { cause: err });
    }
  }

  async logTail(lines = 20): Promise<string> {
    const text = await fs.readFile(path.join(this.dir, 'postgres.log'), 'utf8').catch(() => '');
    return text.split('\n').slice(-lines).join('\n');
  }

  /** Start (or restart after a stop): waits until it accepts connections. */
  async start(): Promise<void> {
    await this.pg('pg_ctl', ['-D', this.dataDir, '-l', path.join(this.dir, 'postgres.log'), '-w', '-t', '60', 'start'], 90_000);
  }

  /** `pg_ctl stop -m immediate`: every backend dies at once, like a crash; recovery runs on the next start. */
  async stopImmediately(): Promise<void> {
    await this.pg('pg_ctl', ['-D', this.dataDir, '-m', 'immediate', '-w', '-t', '30', 'stop'], 60_000);
  }

  async admin<T>(fn: (c: pg.Client) => Promise<T>, database = 'postgres'): Promise<T> {
    const client = new pg.Client({ connectionString: this.url(database), application_name: 'baton-fault-harness' });
    client.on('error', () => undefined);
    await client.connect();
    try {
      return await fn(client);
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  /** A fresh database with every migration applied; returns its URL. */
  async createDatabase(name: string): Promise<string> {
    await this.admin((c) => c.query(`CREATE DATABASE ${c.escapeIdentifier(name)}`));
    const pool = new pg.Pool({ connectionString: this.url(name), max: 2 });
    try {
      await migrateAll(pool);
    } finally {
      await pool.end();
    }
    return this.url(name);
  }

  async dropDatabase(name: string): Promise<void> {
    await this.admin((c) => c.query(`DROP DATABASE IF EXISTS ${c.escapeIdentifier(name)} WITH (FORCE)`));
  }

  /** pg_terminate_backend every session of a Baton host (application_name baton-<component>); returns how many. */
  async terminateBatonConnections(database: string): Promise<number> {
    return this.admin(async (c) => {
      const r = await c.query<{ pid: number }>(
        `SELECT pg_terminate_backend(pid), pid FROM pg_stat_activity
          WHERE datname = $1 AND application_name IN ('baton-executor', 'baton-worker', 'baton-projector', 'baton-api')`,
        [database],
      );
      return r.rowCount ?? 0;
    });
  }

  async destroy(): Promise<void> {
    try {
      if (existsSync(path.join(this.dataDir, 'postmaster.pid'))) {
        await this.pg('pg_ctl', ['-D', this.dataDir, '-m', 'fast', '-w', '-t', '30', 'stop'], 60_000).catch(() =>
          this.pg('pg_ctl', ['-D', this.dataDir, '-m', 'immediate', '-w', '-t', '30', 'stop'], 60_000),
        );
      }
    } finally {
      await fs.rm(this.dir, { recursive: true, force: true });
      this.forgetExitHook();
    }
  }
}
