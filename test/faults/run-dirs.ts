// What a fault run owns on the machine: scratch dirs under the OS tmpdir, marked with the owning
// process, exit hooks that kill its children and servers if it dies, and a sweep of what an
// earlier run that died without cleaning up left behind.
//
// Postgres refuses to run as root: as root, initdb and pg_ctl run as the `postgres` system user
// (runuser) on a data dir that user owns; as anyone else they run as that user.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

const TMP_PREFIX = 'baton-faults-';

export const runningAsRoot = process.getuid?.() === 0;
/** As root, the server's tools run as `postgres` (Postgres refuses root). */
export function pgCommand(bin: string, args: string[]): [string, string[]] {
  return runningAsRoot ? ['runuser', ['-u', 'postgres', '--', bin, ...args]] : [bin, args];
}

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
};

const exitHooks = new Set<() => void>();
let exitHookInstalled = false;
export function onExit(hook: () => void): () => void {
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    // Synchronous only: the process is going away. Kills children and stops servers.
    process.once('exit', () => {
      for (const h of exitHooks) {
        try {
          h();
        } catch {
          /* keep going: every other resource still needs its hook */
        }
      }
    });
  }
  exitHooks.add(hook);
  return () => exitHooks.delete(hook);
}

/** Remove private clusters and NATS stores of earlier runs whose process died without cleaning up. */
export function sweepAbandoned(pgBin: string | undefined): void {
  const tmp = os.tmpdir();
  for (const name of readdirSync(tmp).filter((n) => n.startsWith(TMP_PREFIX))) {
    const dir = path.join(tmp, name);
    const owner = Number(readFileSafe(path.join(dir, 'owner.pid')));
    if (Number.isInteger(owner) && owner > 0 && isAlive(owner)) continue;
    if (!Number.isInteger(owner) || owner <= 0) {
      // No owner file yet: maybe a run still setting up. Leave anything younger than a minute.
      const age = Date.now() - (statSafe(dir)?.mtimeMs ?? 0);
      if (age < 60_000) continue;
    }
    const postmaster = Number(readFileSafe(path.join(dir, 'data', 'postmaster.pid'))?.split('\n')[0]);
    if (pgBin && postmaster > 0 && isAlive(postmaster)) {
      try {
        execFileSync(...pgCommand(path.join(pgBin, 'pg_ctl'), ['-D', path.join(dir, 'data'), '-m', 'immediate', '-w', '-t', '10', 'stop']), { stdio: 'ignore' });
      } catch {
        /* gone already */
      }
    }
    const nats = Number(readFileSafe(path.join(dir, 'nats.pid')));
    if (nats > 0 && isAlive(nats)) process.kill(nats, 'SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
}
function readFileSafe(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}
function statSafe(file: string) {
  try {
    return statSync(file);
  } catch {
    return undefined;
  }
}

/** A scratch dir under the OS tmpdir, owned by this process (a later run sweeps it if this one dies). */
export async function makeRunDir(kind: string): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), `${TMP_PREFIX}${kind}-`));
  await fs.writeFile(path.join(dir, 'owner.pid'), String(process.pid));
  return dir;
}
