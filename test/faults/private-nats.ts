// A private nats-server with JetStream that a fault scenario may stop, wipe and restart at will:
// never the machine's shared one.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { connect as natsConnect } from 'nats';
import { freePort } from '../support/free-port.ts';
import { makeRunDir, onExit, sweepAbandoned } from './run-dirs.ts';
import { sleep, until } from './wait.ts';

const NATS_SERVER = ['/usr/sbin/nats-server', '/usr/local/bin/nats-server', '/usr/bin/nats-server'].find((p) => existsSync(p)) ?? 'nats-server';

export class PrivateNats {
  private proc: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  private readonly output: string[] = [];
  private forgetExitHook: () => void = () => {};

  private constructor(
    readonly dir: string,
    readonly port: number,
  ) {}

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }
  get storeDir(): string {
    return path.join(this.dir, 'jetstream');
  }

  static async start(): Promise<PrivateNats> {
    sweepAbandoned(undefined);
    const nats = new PrivateNats(await makeRunDir('nats'), await freePort());
    nats.forgetExitHook = onExit(() => {
      nats.proc?.kill('SIGKILL');
      rmSync(nats.dir, { recursive: true, force: true });
    });
    await nats.start();
    return nats;
  }

  /** Start on the same port and store (JetStream keeps its streams and consumers across restarts). */
  async start(): Promise<void> {
    if (this.proc) throw new Error('nats-server is already running');
    const proc = spawn(NATS_SERVER, ['-a', '127.0.0.1', '-p', String(this.port), '-js', '-sd', this.storeDir], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.proc = proc;
    const keep = (d: Buffer) => {
      this.output.push(d.toString());
      if (this.output.length > 200) this.output.shift();
    };
    proc.stdout!.on('data', keep);
    proc.stderr!.on('data', keep);
    this.exited = new Promise((resolve) => proc.once('exit', () => resolve()));
    await fs.writeFile(path.join(this.dir, 'nats.pid'), String(proc.pid));
    await until(
      `nats-server with JetStream on ${this.url}`,
      async () => {
        if (proc.exitCode !== null) throw new Error(`nats-server exited with ${proc.exitCode}:\n${this.output.join('').slice(-2000)}`);
        try {
          const nc = await natsConnect({ servers: this.url, reconnect: false, timeout: 1_000 });
          try {
            await (await nc.jetstreamManager({ timeout: 1_000 })).getAccountInfo();
            return true;
          } finally {
            await nc.close();
          }
        } catch {
          return false;
        }
      },
      20_000,
    );
  }

  /**
   * SIGSTOP: the server keeps its connections open and answers nothing, as one behind a stalled
   * network path does; thaw() (or stop()) lets it go on.
   */
  freeze(): void {
    this.proc?.kill('SIGSTOP');
  }
  thaw(): void {
    this.proc?.kill('SIGCONT');
  }

  /** SIGTERM (SIGKILL after 10 s) and wait for it to exit. */
  async stop(): Promise<void> {
    const proc = this.proc;
    if (!proc) return;
    this.proc = undefined;
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill('SIGCONT'); // a frozen server handles SIGTERM only once it runs again
      proc.kill('SIGTERM');
      const killer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
      await this.exited;
      clearTimeout(killer);
    }
  }

  async restart(o: { downMs?: number; wipe?: boolean } = {}): Promise<void> {
    await this.stop();
    if (o.wipe) await fs.rm(this.storeDir, { recursive: true, force: true });
    if (o.downMs) await sleep(o.downMs);
    await this.start();
  }

  async destroy(): Promise<void> {
    try {
      await this.stop();
    } finally {
      await fs.rm(this.dir, { recursive: true, force: true });
      this.forgetExitHook();
    }
  }
}
