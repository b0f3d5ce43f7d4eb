// What `baton eventstore copy --from <url> --to <url>` does (its options are defined in
// eventstore-command.ts): copy every stream from one event store into
// another (src/eventstore/copy.ts), resumably, with a progress bar and a summary.
//
// The checkpoint is a small JSON file, not a table in the target: it works the same for every
// pair of adapters (an EventStoreDB target has no tables), it never adds anything to the target
// that Baton would then read as events, and it is only a shortcut: a copy without it (deleted,
// or another machine) rereads the source from the beginning and skips, by event id, everything
// already in the target. By default it lives in BATON_DATA_DIR, named after the pair of URLs
// (passwords left out), so running the same command again resumes.
//
// BATON_DB_SCHEMA is refused, not applied: the command copies the stores the two URLs name, and
// one variable cannot say which side it would be for. A schema's installation is named in the URL
// instead (`?options=-c%20search_path%3Dtenant1`), each side its own.
import { createHash } from 'node:crypto';
import { constants as fsConstants } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { BatonError } from '../../errors.ts';
import { makeDirectory } from '../../fs/make-directory.ts';
import { copyEventStore, type CopiedEventRef, type CopyProgress } from '../../eventstore/copy.ts';
import { openEventStoreByUrl, eventStoreKindOf, postgresUrlSchema, type OpenedEventStore } from '../../eventstore/open.ts';
import { redactUrl } from '../../db/connect.ts';
import { samePostgresStore } from '../../eventstore/same-store.ts';
import { cliConfig, cliLogger } from '../context.ts';
import { toJson } from '../format.ts';
import { stopGracefullyOnSignal } from '../interrupt.ts';
import { progressLine } from '../progress.ts';

/** What the checkpoint file holds. Positions are strings: they are bigints. */
interface CheckpointFile {
  version: 1;
  from: string;
  to: string;
  /** Source position of the last event copied. */
  position: string;
  lastEvent: { streamId: string; revision: string; eventId: string };
  /** Events read from the source so far, over every run (for the progress bar). */
  read: number;
  updatedAt: string;
}

interface Checkpoint {
  position: bigint;
  lastEvent: CopiedEventRef;
  read: number;
}

export function defaultCheckpointPath(dataDir: string, from: string, to: string): string {
  const pair = createHash('sha256').update(`${redactUrl(from)}\n${redactUrl(to)}`).digest('hex').slice(0, 12);
  return path.join(dataDir, `eventstore-copy-${pair}.json`);
}

/** A checkpoint is a few hundred bytes: anything this big is some other file, not read whole. */
const MAX_CHECKPOINT_BYTES = 1024 * 1024;

async function readCheckpoint(file: string, from: string, to: string): Promise<Checkpoint | undefined> {
  let text: string;
  let handle: fs.FileHandle | undefined;
  try {
    // Non-blocking: opening a FIFO to read would otherwise wait for a writer that never comes.
    handle = await fs.open(file, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK);
    const st = await handle.stat();
    if (!st.isFile()) throw new BatonError(`--checkpoint: ${file} is not a regular file (${st.isDirectory() ? 'a directory' : 'a device, pipe or socket'}); give the path of a checkpoint file`);
    if (st.size > MAX_CHECKPOINT_BYTES) throw new BatonError(`--checkpoint: ${file} holds ${st.size.toLocaleString('en')} bytes, more than a copy checkpoint ever does (at most 1 MiB); pass another --checkpoint file`);
    text = await handle.readFile('utf8');
  } catch (err) {
    if (err instanceof BatonError) throw err;
    if ((err as { code?: string }).code === 'ENOENT') return undefined;
    throw new BatonError(`--checkpoint: cannot read ${file}: ${(err as Error).message}`, { cause: err });
  } finally {
    await handle?.close();
  }
  let c: CheckpointFile;
  try {
    c = JSON.parse(text) as CheckpointFile;
    if (c.version !== 1 || typeof c.position !== 'string' || typeof c.lastEvent?.eventId !== 'string') throw new Error('unknown format');
    BigInt(c.position);
    BigInt(c.lastEvent.revision);
  } catch (err) {
    throw new BatonError(`--checkpoint: ${file} is not a copy checkpoint (${(err as Error).message}); delete it to copy from the beginning`, { cause: err });
  }
  if (c.from !== redactUrl(from) || c.to !== redactUrl(to)) {
    throw new BatonError(`--checkpoint: ${file} belongs to a copy from ${c.from} to ${c.to}; pass another --checkpoint file`);
  }
  return {
    position: BigInt(c.position),
    lastEvent: { streamId: c.lastEvent.streamId, revision: BigInt(c.lastEvent.revision), eventId: c.lastEvent.eventId },
    read: c.read ?? 0,
  };
}

/** Written to a temporary file and renamed over the old one, so a crash never leaves half a file. */
async function writeCheckpoint(file: string, from: string, to: string, p: { position: bigint; lastEvent: CopiedEventRef; read: number }): Promise<void> {
  const c: CheckpointFile = {
    version: 1,
    from: redactUrl(from),
    to: redactUrl(to),
    position: p.position.toString(),
    lastEvent: { streamId: p.lastEvent.streamId, revision: p.lastEvent.revision.toString(), eventId: p.lastEvent.eventId },
    read: p.read,
    updatedAt: new Date().toISOString(),
  };
  const tmp = `${file}.${process.pid}.tmp`;
  try {
    await fs.writeFile(tmp, `${JSON.stringify(c, null, 2)}\n`);
    await fs.rename(tmp, file);
  } catch (err) {
    await fs.rm(tmp, { force: true }).catch(() => undefined);
    throw checkpointUnwritable(file, err);
  }
}

const checkpointUnwritable = (file: string, err: unknown) => new BatonError(`--checkpoint: cannot write ${file}: ${(err as Error).message}`, { cause: err });

/**
 * Make the checkpoint's directory and try writing beside the file, before anything is copied: a
 * place it cannot be saved is refused at once, not after the first batch reached the target.
 */
async function checkWritable(file: string): Promise<void> {
  const probe = `${file}.${process.pid}.tmp`;
  try {
    await makeDirectory(path.dirname(file));
    await fs.writeFile(probe, '');
    await fs.rm(probe);
  } catch (err) {
    await fs.rm(probe, { force: true }).catch(() => undefined);
    throw checkpointUnwritable(file, err);
  }
}

/**
 * Two URLs that differ in text can reach one store (`localhost` for `127.0.0.1`, a parameter
 * added): the servers are asked (src/eventstore/same-store.ts), before anything is opened or migrated.
 */
async function refuseSameStore(from: string, to: string): Promise<void> {
  if (eventStoreKindOf(from) !== 'postgres' || eventStoreKindOf(to) !== 'postgres') return;
  const { same, database } = await samePostgresStore(from, to);
  if (same) {
    throw new BatonError(
      `--from (${redactUrl(from)}) and --to (${redactUrl(to)}) reach the same event store: the same baton_events table in database ${database}; copy into another database, or another schema (?options=-c%20search_path%3D<schema>)`,
    );
  }
}

export async function eventStoreCopyCommand(o: { from: string; to: string; checkpoint?: string; batchSize: number; limit?: number; json?: boolean }): Promise<void> {
  for (const [url, what] of [[o.from, '--from'], [o.to, '--to']] as const) {
    if (eventStoreKindOf(url, what) === 'postgres') postgresUrlSchema(url, what);
  }
  if (redactUrl(o.from) === redactUrl(o.to)) throw new BatonError(`--from and --to name the same event store (${redactUrl(o.from)})`);
  const config = cliConfig();
  if (config.dbSchema !== undefined) {
    throw new BatonError(
      `BATON_DB_SCHEMA is set (${config.dbSchema}), but eventstore copy does not read it: it copies the stores the --from and --to URLs name. ` +
        `Unset it, and name a schema's installation in the URL of its side, e.g. --from 'postgres://user@host:5432/db?options=-c%20search_path%3D${config.dbSchema}' (--to the same way)`,
    );
  }
  const log = cliLogger(config);
  const checkpointFile = path.resolve(o.checkpoint ?? defaultCheckpointPath(config.dataDir, o.from, o.to));
  const checkpoint = await readCheckpoint(checkpointFile, o.from, o.to);
  await checkWritable(checkpointFile);
  await refuseSameStore(o.from, o.to);

  let source: OpenedEventStore | undefined;
  let target: OpenedEventStore | undefined;
  try {
    source = await openEventStoreByUrl(o.from, { log, applicationName: 'baton-copy-source' });
    target = await openEventStoreByUrl(o.to, { log, migrate: true, applicationName: 'baton-copy-target' });
    // Said in the summary: what the target held before (an earlier copy from this source, resumed).
    const targetHeld = target.countEvents ? await target.countEvents() : undefined;
    const total = source.countEvents ? Math.max(0, (await source.countEvents()) - (checkpoint?.read ?? 0)) : undefined;
    const progress = progressLine(`copying ${source.label} → ${target.label}`, total);
    const previouslyRead = checkpoint?.read ?? 0;
    // Each batch is appended, then checkpointed: a signal lets the one in progress finish both.
    const stop = stopGracefullyOnSignal('batch of events');
    const result = await copyEventStore({
      signal: stop.signal,
      source: source.store,
      target: target.store,
      after: checkpoint?.position,
      lastCopied: checkpoint?.lastEvent,
      batchSize: o.batchSize,
      limit: o.limit,
      onBatch: async (p: CopyProgress) => {
        await writeCheckpoint(checkpointFile, o.from, o.to, { position: p.position, lastEvent: p.lastEvent, read: previouslyRead + p.read });
        progress.update(p.read);
      },
    }).finally(() => stop.dispose());
    const interrupted = stop.received();
    const stoppedBy = interrupted ? `stopped by ${interrupted}` : `stopped at --limit ${o.limit}`;
    const seconds = (result.ms / 1000).toFixed(1);
    progress.finish(
      result.read === 0
        ? 'nothing new to copy'
        : `${result.read.toLocaleString('en')} events in ${seconds} s${result.complete ? '' : ` (${stoppedBy})`}`,
    );
    const summary = {
      from: source.label,
      to: target.label,
      read: result.read,
      appended: result.appended,
      alreadyPresent: result.alreadyPresent,
      ...(targetHeld !== undefined && { targetHeld }),
      streamsCreated: result.streamsCreated,
      position: result.position,
      complete: result.complete,
      checkpoint: checkpointFile,
      resumed: checkpoint !== undefined,
      seconds: Number(seconds),
      ...(interrupted && { interrupted }),
    };
    if (o.json) {
      console.log(toJson(summary));
      return;
    }
    const lines = [
      result.read === 0
        ? `nothing new to copy from ${source.label} to ${target.label}${checkpoint ? ` after position ${checkpoint.position}` : ''}`
        : `copied ${source.label} → ${target.label}: ${result.read.toLocaleString('en')} events read, ` +
          `${result.appended.toLocaleString('en')} appended (${result.streamsCreated.toLocaleString('en')} new streams), ` +
          `${result.alreadyPresent.toLocaleString('en')} already in the target, in ${seconds} s`,
    ];
    if (targetHeld) lines.push(`the target already held ${targetHeld.toLocaleString('en')} events before this run`);
    if (checkpoint && result.read > 0) lines.push(`resumed after position ${checkpoint.position}`);
    lines.push(
      result.complete
        ? `done: the target holds every event the source had (checkpoint ${checkpointFile}, position ${result.position})`
        : `${interrupted ? `stopped by ${interrupted}` : `stopped after --limit ${o.limit}`}: run the same command again to go on (checkpoint ${checkpointFile}, position ${result.position})`,
    );
    console.log(lines.join('\n'));
  } finally {
    await source?.close();
    await target?.close();
  }
}
