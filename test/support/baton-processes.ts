// Baton hosts as real child processes (`node bin/baton.js …`) for end-to-end tests: their
// output is kept for diagnostics, and whatever is still running at the end is killed.
import { spawn, type ChildProcess } from 'node:child_process';

export interface BatonProcess {
  name: string;
  proc: ChildProcess;
  output: string[];
  exited: Promise<number | null>;
}

export function batonProcesses(env: () => Record<string, string>) {
  const children: BatonProcess[] = [];
  return {
    children,
    start(name: string, args: string[]): BatonProcess {
      const proc = spawn(process.execPath, ['bin/baton.js', ...args], {
        env: { ...process.env, BATON_LOG_LEVEL: 'warn', ...env() },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const output: string[] = [];
      proc.stdout!.on('data', (d: Buffer) => output.push(d.toString()));
      proc.stderr!.on('data', (d: Buffer) => output.push(d.toString()));
      const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
      const child = { name, proc, output, exited };
      children.push(child);
      return child;
    },
    /** The tail of every child's output, for an assertion's message. */
    diagnostics: () => children.map((c) => `--- ${c.name}\n${c.output.join('').slice(-2000)}`).join('\n'),
    async killAll(): Promise<void> {
      for (const c of children) if (c.proc.exitCode === null && c.proc.signalCode === null) c.proc.kill('SIGKILL');
      await Promise.all(children.map((c) => c.exited));
    },
  };
}
