// A Baton host (`node bin/baton.js executor|worker|projector`) as a child process a scenario can
// signal, stop, continue and kill, keeping the tail of its output for a failure's diagnostics.
import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = path.resolve(fileURLToPath(new URL('../..', import.meta.url)));
export const FAULT_ACTIONS = 'test/fixtures/actions/fault-actions.ts';

/**
 * The executor and worker settings every Baton child gets, so that a dead worker or a handoff
 * nobody starts is noticed in seconds, not the production minutes. The names are the config
 * contract of the executor's timeouts (schedule-to-start reclaim, stale-heartbeat detection).
 */
export const FAST_TIMEOUTS: Readonly<Record<string, string>> = {
  BATON_SCHEDULE_TO_START_TIMEOUT: '2s',
  BATON_HEARTBEAT_INTERVAL: '500ms',
  BATON_HEARTBEAT_STALE_AFTER: '3',
  BATON_START_TO_CLOSE_TIMEOUT: '60s',
  BATON_SHUTDOWN_TIMEOUT: '2s',
};

export class BatonProcess {
  readonly output: string[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private stopped = false;

  constructor(
    readonly name: string,
    readonly proc: ChildProcess,
  ) {
    const keep = (d: Buffer) => {
      this.output.push(d.toString());
      if (this.output.length > 400) this.output.shift();
    };
    proc.stdout!.on('data', keep);
    proc.stderr!.on('data', keep);
    this.exited = new Promise((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal })));
  }

  get pid(): number {
    return this.proc.pid!;
  }
  alive(): boolean {
    return this.proc.exitCode === null && this.proc.signalCode === null;
  }
  /** SIGKILL, SIGTERM, SIGSTOP, SIGCONT, … */
  signal(signal: NodeJS.Signals): void {
    if (!this.alive()) throw new Error(`${this.name} is not running (exit ${this.proc.exitCode ?? this.proc.signalCode})`);
    this.proc.kill(signal);
    if (signal === 'SIGSTOP') this.stopped = true;
    if (signal === 'SIGCONT') this.stopped = false;
  }
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    if (this.alive()) {
      if (this.stopped && signal !== 'SIGKILL') this.signal('SIGCONT');
      this.proc.kill(signal);
    }
    return this.exited;
  }
  tail(chars = 2_000): string {
    return this.output.join('').slice(-chars);
  }
}
