// The projector in a process of its own, as deployments run it (docker-compose.yml: `baton
// projector` beside the executor and the workers), for benchmarks that measure that layout: the
// projector's folds and writes then take another core, not the event loop that schedules and
// starts the work. Measured in `baton bench` (10,000 executions, NATS, 2 cores): the projector
// was ~40% of the one-process layout's CPU.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import { isConfigVariable } from '../config.ts';
import { BatonError } from '../errors.ts';
import { DEPLOYED_NODE_FLAGS, packageRoot } from './deployed-node.ts';
import { onInterrupt } from './interrupt.ts';

const READY_TIMEOUT_MS = 30_000;
// The projector runs with the young generation the image gives every host (deployed-node.ts).
// Measured in `baton bench` (20,000 executions, 2026-11-25): the projector's garbage collection
// took 648 ms of its samples with Node's default, 366 ms with it.
const STOP_TIMEOUT_MS = 10_000;

/**
 * This process's environment without the BATON_* variables that are not Baton's configuration (a
 * harness's own knobs, such as bench-peers' BATON_DIR): `baton projector` refuses unknown ones.
 */
function childEnvironment(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('BATON_') || isConfigVariable(name)));
}

export interface ProjectorProcess {
  pid: number;
  stop(): Promise<void>;
}

/** Start `baton projector` on `databaseUrl` and resolve once it says it is running. */
export async function startProjectorProcess(databaseUrl: string): Promise<ProjectorProcess> {
  const child = spawn(process.execPath, [...DEPLOYED_NODE_FLAGS, path.join(packageRoot(), 'bin', 'baton.js'), 'projector', '--metrics-port', '0'], {
    env: { ...childEnvironment(), BATON_DATABASE_URL: databaseUrl, BATON_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const killIfInterrupted = onInterrupt('projector process', () => child.kill('SIGKILL'));
  // A process that exits without stopping it (process.exit, as the peers harness's worker does on
  // its phase timeout) takes it along: left running, it went on projecting into the harness's
  // database while the next library was measured.
  const killOnExit = () => void child.kill('SIGKILL');
  process.once('exit', killOnExit);
  void exited.then(() => {
    killIfInterrupted();
    process.off('exit', killOnExit);
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => void (stderr = (stderr + chunk.toString()).slice(-2_000)));
  const ready = new Promise<void>((resolve) => {
    readline.createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line.includes('projector running')) resolve();
    });
  });
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    ready.then(() => 'ready' as const),
    exited.then((code) => `exited with code ${code}` as const),
    new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), READY_TIMEOUT_MS))),
  ]);
  clearTimeout(timer);
  if (outcome !== 'ready') {
    child.kill('SIGKILL');
    throw new BatonError(`baton projector did not start (${outcome}): ${stderr.trim() || 'no output on stderr'}`);
  }
  return { pid: child.pid!, stop: () => stopChild(child, exited) };
}

async function stopChild(child: ChildProcess, exited: Promise<number | null>): Promise<void> {
  if (child.exitCode !== null) return;
  child.kill('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const stopped = await Promise.race([exited.then(() => true), new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), STOP_TIMEOUT_MS)))]);
  clearTimeout(timer);
  if (!stopped) {
    child.kill('SIGKILL');
    await exited;
  }
}
