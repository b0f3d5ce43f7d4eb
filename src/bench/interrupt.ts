// What an interrupted benchmark (Ctrl-C, SIGTERM) must not leave behind: its scratch database,
// its `baton projector` process, its JetStream streams. Before, a bench stopped mid-run left them
// all: the process kept running, the database and streams stayed until someone removed them. A
// signal now runs the cleanups registered here (at most CLEANUP_MS) and exits as the signal would
// (130, 143).
import { sleep } from '../async/sleep.ts';

const CLEANUP_MS = 10_000;
const cleanups = new Map<() => unknown, string>();
let listening = false;
let stopping = false;

/** Run `cleanup` (of `what`: `its scratch database`) if a signal interrupts this process before the returned function is called. */
export function onInterrupt(what: string, cleanup: () => unknown): () => void {
  cleanups.set(cleanup, what);
  if (!listening) {
    listening = true;
    process.on('SIGINT', () => void interrupted('SIGINT', 130));
    process.on('SIGTERM', () => void interrupted('SIGTERM', 143));
  }
  return () => void cleanups.delete(cleanup);
}

async function interrupted(signal: NodeJS.Signals, code: number): Promise<void> {
  // A terminal's Ctrl-C reaches the parent as well, which forwards it (deployed-node.ts): once is enough.
  if (stopping) return;
  stopping = true;
  // The work still running fails as its database goes (connections terminated): expected, not news.
  process.on('unhandledRejection', () => undefined);
  process.on('uncaughtException', () => undefined);
  // What is registered now, not every kind a benchmark may make: the peer adapter makes no scratch database.
  const made = [...new Set(cleanups.values())];
  process.stderr.write(`baton bench: ${signal}: removing what the benchmark made${made.length > 0 ? ` (${made.join(', ')})` : ''} …\n`);
  const all = Promise.allSettled([...cleanups.keys()].map(async (cleanup) => cleanup()));
  await Promise.race([all, sleep(CLEANUP_MS)]);
  process.exit(code);
}
