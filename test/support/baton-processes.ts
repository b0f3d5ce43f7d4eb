// Baton hosts as real child processes (`node bin/baton.js …`) for end-to-end tests: their
// output is kept for diagnostics, and whatever is still running at the end is killed.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';

const BIN = path.resolve('bin/baton.js');

export interface BatonProcess {
  name: string;
  proc: ChildProcess;
  output: string[];
  exited: Promise<number | null>;
  /** Resolves with the first match of `pattern` in the output so far or to come; rejects after `ms` or when the process exits first. */
  waitFor(pattern: RegExp, ms: number): Promise<RegExpMatchArray>;
  /** The exit code, or rejects after `ms`. */
  exitWithin(ms: number): Promise<number | null>;
}

export interface StartOptions {
  /** Working directory. Default: the repository. */
  cwd?: string;
  /** Its own process group (`detached`), as a shell starts a foreground job: signal it with `process.kill(-pid, …)`. */
  group?: boolean;
  /** Added to (and overriding) the environment the harness gives every child. */
  env?: Record<string, string>;
}

export function batonProcesses(env: () => Record<string, string>) {
  const children: BatonProcess[] = [];
  return {
    children,
    start(name: string, args: string[], o: StartOptions = {}): BatonProcess {
      const proc = spawn(process.execPath, [BIN, ...args], {
        env: { ...process.env, BATON_LOG_LEVEL: 'warn', ...env(), ...o.env },
        stdio: ['ignore', 'pipe', 'pipe'],
        cwd: o.cwd,
        detached: o.group ?? false,
      });
      const output: string[] = [];
      const listeners = new Set<() => void>();
      const onData = (d: Buffer) => {
        output.push(d.toString());
        for (const l of listeners) l();
      };
      proc.stdout!.on('data', onData);
      proc.stderr!.on('data', onData);
      const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
      const waitFor = (pattern: RegExp, ms: number) =>
        new Promise<RegExpMatchArray>((resolve, reject) => {
          const done = (err?: Error, m?: RegExpMatchArray) => {
            clearTimeout(timer);
            listeners.delete(check);
            if (err) reject(err);
            else resolve(m!);
          };
          const check = () => {
            const m = output.join('').match(pattern);
            if (m) done(undefined, m);
          };
          const timer = setTimeout(() => done(new Error(`${name}: no ${pattern} in its output within ${ms} ms:\n${output.join('').slice(-3000)}`)), ms);
          listeners.add(check);
          void exited.then((code) => {
            check();
            done(new Error(`${name} exited (${code}) before printing ${pattern}:\n${output.join('').slice(-3000)}`));
          });
          check();
        });
      const exitWithin = (ms: number) =>
        Promise.race([
          exited,
          new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${name} still running after ${ms} ms:\n${output.join('').slice(-3000)}`)), ms).unref()),
        ]);
      const child = { name, proc, output, exited, waitFor, exitWithin };
      children.push(child);
      return child;
    },
    /** The tail of every child's output, for an assertion's message. */
    diagnostics: () => children.map((c) => `--- ${c.name}\n${c.output.join('').slice(-2000)}`).join('\n'),
    async killAll(): Promise<void> {
      // An embedded Postgres a killed `baton dev` owned survives it (its own process group):
      // the test that started one stops it (reapAbandonedEmbeddedPostgres on its data dir).
      for (const c of children) if (c.proc.exitCode === null && c.proc.signalCode === null) c.proc.kill('SIGKILL');
      await Promise.all(children.map((c) => c.exited));
    },
  };
}
