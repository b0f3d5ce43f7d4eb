// A file that says "this process holds X": created exclusively (O_EXCL) with the holder's
// identity, removed by the holder when done. A file whose holder has died is stale and taken
// over, so a crash (SIGKILL, power loss) never leaves X locked for good.
import { readFileSync, rmSync } from 'node:fs';
import fs from 'node:fs/promises';
import { currentProcess, isSameProcess, parseIdentity, type ProcessIdentity } from './identity.ts';

// An empty or unreadable file is one being written right now, unless it is older than this:
// then its writer died between creating and writing it.
const UNWRITTEN_STALE_MS = 10_000;

export interface HeldPidFile {
  readonly file: string;
  /** Remove the file if it still names this process. Idempotent. */
  release(): Promise<void>;
  /** The same, synchronously: for process 'exit' handlers. */
  releaseSync(): void;
}

export type PidFileClaim =
  | { claimed: true; held: HeldPidFile }
  /** `holder` is undefined while the holder is still writing the file. */
  | { claimed: false; holder: ProcessIdentity | undefined };

/** Claim `file` for this process, unless a live process holds it. Takes over a stale one. */
export async function claimPidFile(file: string): Promise<PidFileClaim> {
  const me = await currentProcess();
  const content = JSON.stringify(me);
  for (;;) {
    try {
      await fs.writeFile(file, content, { flag: 'wx' });
      return { claimed: true, held: held(file, content) };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    const text = await fs.readFile(file, 'utf8').catch(() => undefined);
    if (text === undefined) continue; // removed meanwhile: try again
    const holder = parseIdentity(text);
    if (holder ? await isSameProcess(holder) : await isFresh(file)) return { claimed: false, holder };
    // Stale. Another process may have taken it over since we read it: remove only what we read.
    const now = await fs.readFile(file, 'utf8').catch(() => undefined);
    if (now === text) await fs.rm(file, { force: true });
  }
}

/** Who holds `file` now (a live process), or undefined. */
export async function pidFileHolder(file: string): Promise<ProcessIdentity | undefined> {
  const holder = parseIdentity(await fs.readFile(file, 'utf8').catch(() => ''));
  return holder && (await isSameProcess(holder)) ? holder : undefined;
}

async function isFresh(file: string): Promise<boolean> {
  const st = await fs.stat(file).catch(() => undefined);
  return st !== undefined && Date.now() - st.mtimeMs < UNWRITTEN_STALE_MS;
}

function held(file: string, content: string): HeldPidFile {
  const mine = () => {
    try {
      return readFileSync(file, 'utf8') === content;
    } catch {
      return false;
    }
  };
  const releaseSync = () => {
    if (mine()) rmSync(file, { force: true });
  };
  return { file, releaseSync, release: async () => releaseSync() };
}
