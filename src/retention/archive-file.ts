// Archive files: one portable history per stream, in the format `baton export` writes and
// `baton replay --file` / `baton inspect --file` read (src/replay/history.ts). Written to a
// temporary file, fsynced, renamed into place and the directory fsynced, so that once this
// returns the file survives a crash, and a crash before leaves no half-written file (the next
// run writes it again: same name, same content). A name that holds another history is never
// written over (archivePathFor).
import { BatonError } from '../errors.ts';
import { open, readFile, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import type { StoredEvent } from '../eventstore/event-store.ts';
import { makeDirectory } from '../fs/make-directory.ts';
import { fromStored, toHistoryDocument, WORKFLOW_HISTORY_FORMAT, type HistoryEvent } from '../replay/history.ts';

// Defined beside the execution history's format, whose readers recognise a workflow's file.
export { WORKFLOW_HISTORY_FORMAT };

/** A workflow's own stream, in the same shape as an execution history (its steps are archived as execution histories of their own). */
export function workflowHistoryDocument(workflowId: string, events: readonly StoredEvent[], executionIds: readonly string[], exportedAt = new Date()) {
  return { format: WORKFLOW_HISTORY_FORMAT, formatVersion: 1, workflowId, exportedAt: exportedAt.toISOString(), executions: [...executionIds], events: events.map(fromStored) as HistoryEvent[] };
}

/**
 * Where an archive file goes: `execution-<id>.json` (workflow-…), or, when that name already holds
 * another history, `execution-<id>.2.json`, `.3.json`… An id comes back after its archive (a key
 * submitted again, a workflow id reused) and two stores may share an archive directory: a file
 * written before is never replaced by another history. A file that holds this same history (a run
 * a crash cut short), or nothing readable, is written again under its own name.
 */
export async function archivePathFor(file: string, doc: { events: readonly unknown[] }): Promise<string> {
  const events = JSON.parse(JSON.stringify(doc.events)) as unknown;
  const { dir, name } = path.parse(file);
  for (let n = 1; ; n++) {
    const candidate = n === 1 ? file : path.join(dir, `${name}.${n}.json`);
    let held: string;
    try {
      held = await readFile(candidate, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return candidate;
      throw err;
    }
    let replace: boolean;
    try {
      replace = isDeepStrictEqual((JSON.parse(held) as { events?: unknown }).events, events);
    } catch {
      // Not JSON, so no history can be read from it (a file cut short outside this writer, which
      // renames only whole files into place): written over, as a crash's leftover would be.
      replace = true;
    }
    if (replace) return candidate;
  }
}

export const executionArchivePath = (dir: string, executionId: string) => path.join(dir, `execution-${executionId}.json`);
export const workflowArchivePath = (dir: string, workflowId: string) => path.join(dir, `workflow-${workflowId}.json`);

export function executionHistoryDocument(executionId: string, events: readonly StoredEvent[], exportedAt = new Date()) {
  return toHistoryDocument(executionId, events.map(fromStored), exportedAt);
}

async function fsyncDir(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Why a file system refused: what a user can act on, without a stack. */
const FS_REASONS: Record<string, string> = {
  // From mkdir, where the parent exists: a file system that makes no new entries (/proc, /sys).
  ENOENT: 'no such directory, and it cannot be created there',
  EEXIST: 'a file stands where a directory must be',
  ENOTDIR: 'a file stands where a directory must be',
  ENOSPC: 'the disk is full',
  EDQUOT: 'the disk quota is used up',
  EROFS: 'the file system is read-only',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
};

/** A failure to write the archive, as one line: where, why, and that the store kept everything. */
export function archiveUnwritable(archiveDir: string, err: unknown): BatonError {
  const e = err as NodeJS.ErrnoException;
  const why = (e?.code && FS_REASONS[e.code]) ?? e?.message ?? String(err);
  const at = e?.path ? ` (${e.path})` : '';
  return new BatonError(`cannot write the archive in ${archiveDir}: ${why}${at}; nothing was removed from the store (files already written there are complete and may be left or deleted)`, { cause: err });
}

/** Write `doc` as JSON to `file` durably (see above). */
export async function writeDurably(file: string, doc: unknown): Promise<void> {
  const dir = path.dirname(file);
  await makeDirectory(dir);
  const tmp = `${file}.${process.pid}.tmp`;
  const handle = await open(tmp, 'w');
  try {
    await handle.writeFile(`${JSON.stringify(doc, null, 1)}\n`);
    await handle.sync();
  } catch (err) {
    await handle.close().catch(() => undefined);
    await rm(tmp, { force: true });
    throw err;
  }
  await handle.close();
  await rename(tmp, file);
  await fsyncDir(dir);
}
