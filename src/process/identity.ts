// Which process is which, on this machine: a pid plus its start time, so that a pid the kernel
// has handed to another program since (containers restart pids low) is not taken for the
// process that recorded it. Used by the files that say who owns what (the embedded Postgres's
// owner and start lock, `baton dev`'s lock) and by the worker-id check.
import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';

export interface ProcessIdentity {
  pid: number;
  /** Linux: start time from /proc/<pid>/stat (clock ticks since boot); null elsewhere. */
  startTime: string | null;
}

export async function processStartTime(pid: number): Promise<string | null> {
  if (process.platform !== 'linux') return null;
  const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8').catch(() => null);
  // Fields after the parenthesised command name; starttime is field 22 overall.
  return stat?.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
}

export async function currentProcess(): Promise<ProcessIdentity> {
  return { pid: process.pid, startTime: await processStartTime(process.pid) };
}

/**
 * Is `pid` alive (a process we may not signal counts as alive)? A zombie is not: it ended, and only
 * waits for its parent to reap it, which a container's init may take a while to do; signal 0
 * reaches it all the same, so a worker killed with -9 kept its id "in use" until then.
 */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
  return !isZombie(pid);
}

function isZombie(pid: number): boolean {
  if (process.platform !== 'linux') return false;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.charAt(stat.lastIndexOf(')') + 2) === 'Z'; // the state, right after the command name
  } catch {
    return false; // no /proc entry: signal 0 just reached it, so it is not gone; call it alive
  }
}

/** Is the process that recorded `p` still running (not a later process that reuses its pid)? */
export async function isSameProcess(p: ProcessIdentity): Promise<boolean> {
  if (!isAlive(p.pid)) return false;
  return p.startTime === null || (await processStartTime(p.pid)) === p.startTime;
}

/** Send `sig` to `pid`; a process already gone is not an error. */
export function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

/** A recorded identity: JSON `{pid, startTime}`, or (older files) a bare pid. undefined when unreadable. */
export function parseIdentity(text: string): ProcessIdentity | undefined {
  const bare = Number(text.trim());
  if (Number.isInteger(bare) && bare > 0) return { pid: bare, startTime: null };
  try {
    const v = JSON.parse(text) as Partial<ProcessIdentity>;
    return typeof v.pid === 'number' && Number.isInteger(v.pid) && v.pid > 0 ? { pid: v.pid, startTime: v.startTime ?? null } : undefined;
  } catch {
    return undefined;
  }
}
