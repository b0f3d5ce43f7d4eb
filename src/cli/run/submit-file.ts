// What `baton submit --file <ndjson>` does: one submission per line ({action, input?,
// idempotencyKey?, maxAttempts?, priority?, tags?, namespace?}; blank lines are skipped), read as a stream
// (`-` is stdin; ndjson-lines.ts), checked and submitted a batch at a time through the one batch
// check and one appendMany (src/runtime/submission.ts). A batch with a bad line is refused whole,
// naming the line and the field, and nothing of it is written; the batches before it stay
// submitted, and the refusal says how far the file got, so it can be fixed and submitted again
// (keys make that safe). A line the store does not take (its key names an earlier, different
// request) is reported alone. If the database fails, the lines whose fate is unknown are named.
// A progress line on stderr, then a summary (or JSON) on stdout.
import fs from 'node:fs';
import { statusOf } from '../../../actors/execution.machine.ts';
import { createActionRegistry } from '../../actions/index.ts';
import { loadConfig } from '../../config.ts';
import { BatonError } from '../../errors.ts';
import { repeatedJsonKeyProblems } from '../../input/duplicate-keys.ts';
import { InvalidInputError } from '../../input/errors.ts';
import { formatPath } from '../../input/rules.ts';
import { unknownNameMessage } from '../../input/nearest.ts';
import type { Submission, SubmissionNames } from '../../runtime/submission.ts';
import { checkSubmissions, itemFailure, type ItemFailure } from '../../runtime/submission.ts';
import { lineProblem, ndjsonLines, openLines } from './ndjson-lines.ts';
import { withContext } from '../context.ts';
import { toJson } from '../format.ts';
import { loadActions } from '../hosts.ts';
import { progressLine } from '../progress.ts';

/**
 * Lines per batch, one appendMany each. Measured with `baton bench submit` (2-core machine under
 * load, group-committed appendMany), submissions/s with 1 and 4 batches in flight: batches of
 * 250: 4,000 and 11,400; 500: 3,500–5,600 and 9,700–11,900; 1,000: 3,600 and 7,900. 250 to 500
 * is the plateau; 500 holds back fewer lines behind a refused one than 1,000 would, and is below
 * the API's submitExecutions bound (1,000), so a batch that works here works there.
 */
export const DEFAULT_FILE_BATCH = 500;
export const MAX_FILE_BATCH = 1_000;
/**
 * Batches appended at once while the next are read and checked. `baton bench submit`: 1 in flight
 * ~3,500–5,600 submissions/s, 4 in flight ~9,700–11,900/s (batches of 500, group-committed
 * appendMany, a loaded 2-core machine): most of a batch's time is the database's, so overlapping
 * a few keeps it busy; more than 4 only queues at Postgres.
 */
const BATCHES_IN_FLIGHT = 4;
/**
 * A batch also ends once its lines hold this much text: lines may each be up to ~4 MiB, and 140 of
 * them in one batch made an event-store statement past V8's longest string (~512 MiB). 16 MiB a
 * batch, 4 in flight, keeps this process and the store's statements to tens of MiB; batches of
 * small lines never come near it (500 lines of 1 KiB are 0.5 MiB).
 */
const MAX_BATCH_TEXT = 16 * 1024 * 1024;

const STORE_FAILED: ItemFailure['code'] = 'STORE_FAILED';
/** Why submitting a file again is safe, said wherever a run stops short. */
const KEYED_LINES_FOUND_AGAIN = 'lines with an idempotencyKey are found again, not duplicated';
const FIELDS = ['action', 'input', 'idempotencyKey', 'maxAttempts', 'priority', 'tags', 'actionVersion', 'namespace'] as const;
// A line longer than this cannot be a submission the store takes (an input is at most ~4 MiB).
const MAX_LINE_BYTES = 5 * 1024 * 1024;

export interface SubmitFileOptions {
  actions?: string;
  /** `--tag k=v` on the command line: added to every line (a line's own tag of that key wins). */
  tags?: Record<string, string>;
  /** `--namespace` (or BATON_NAMESPACE): the namespace of every line that names none. */
  namespace?: string;
  batchSize?: number;
  json?: boolean;
}

interface Line {
  number: number;
  submission: Submission;
  /** The line's length in characters. */
  length: number;
}

const namesOfLine = (line: number): SubmissionNames =>
  Object.fromEntries(FIELDS.map((f) => [f, `line ${line}: ${f}`])) as SubmissionNames;

function parseLine(text: string, number: number, tags: Record<string, string> | undefined, namespace?: string): Submission {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw lineProblem(number, `not valid JSON (${(e as Error).message})`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw lineProblem(number, 'must be a JSON object like {"action": "core.noop", "input": {}}');
  const repeated = repeatedJsonKeyProblems(text);
  if (repeated.length > 0) throw new InvalidInputError(repeated.map((p) => ({ path: `line ${number}: ${formatPath(p.path)}`, message: p.message })));
  const record = value as Record<string, unknown>;
  const unknown = Object.keys(record).filter((k) => !(FIELDS as readonly string[]).includes(k));
  if (unknown.length > 0) throw new InvalidInputError(unknown.map((k) => ({ path: `line ${number}: ${k}`, message: unknownNameMessage('field', k, FIELDS) })));
  // The batch check says what is wrong with each value (a missing action, a string priority).
  const own = record['tags'];
  const merged = tags && (own === undefined || (typeof own === 'object' && own !== null && !Array.isArray(own))) ? { ...tags, ...(own as object | undefined) } : own;
  return { ...(record as unknown as Submission), ...(merged !== undefined && { tags: merged as Record<string, string> }), ...(record['namespace'] === undefined && namespace !== undefined && { namespace }) };
}

/** Lines of `path` (`-`: stdin), numbered from 1, blank ones skipped; `read.lines` counts them all. */
async function* readLines(input: NodeJS.ReadableStream, read: { lines: number }, tags: Record<string, string> | undefined, namespace?: string): AsyncGenerator<Line> {
  for await (const { number, text } of ndjsonLines(input, MAX_LINE_BYTES)) {
    read.lines = number;
    if (text.trim() === '') continue;
    yield { number, submission: parseLine(text, number, tags, namespace), length: text.length };
  }
}

/** How many lines a regular file has, for the progress bar (stdin and pipes: unknown). */
async function countLines(path: string): Promise<number | undefined> {
  if (path === '-' || !fs.statSync(path).isFile()) return undefined;
  let n = 0;
  let last = 10;
  for await (const chunk of fs.createReadStream(path) as AsyncIterable<Buffer>) {
    for (let i = chunk.indexOf(10); i >= 0; i = chunk.indexOf(10, i + 1)) n++;
    last = chunk.at(-1) ?? last;
  }
  return last === 10 ? n : n + 1;
}

interface ItemResult {
  line: number;
  executionId: string;
  created: boolean;
  status?: string;
  /** Not submitted: why (itemFailure's code and message). */
  code?: string;
  error?: string;
}

/** The highest line of `results` (0: none), without spreading a file's worth of arguments onto the stack. */
const highestLine = (results: readonly ItemResult[]) => results.reduce((most, r) => Math.max(most, r.line), 0);

/** `a–b, c` for sorted line numbers. */
const lineRanges = (lines: number[]) => {
  const out: string[] = [];
  for (let i = 0; i < lines.length; ) {
    let j = i;
    while (j + 1 < lines.length && lines[j + 1]! <= lines[j]! + 1) j++;
    out.push(i === j ? `${lines[i]}` : `${lines[i]}–${lines[j]}`);
    i = j + 1;
  }
  return out.join(', ');
};

export async function submitFileCommand(path: string, o: SubmitFileOptions): Promise<void> {
  const input = openLines(path); // a missing file, a directory: refused before anything else
  const config = loadConfig();
  const actions = createActionRegistry(await loadActions(o.actions, config));
  const namespace = o.namespace ?? config.namespace;
  const batchSize = o.batchSize ?? DEFAULT_FILE_BATCH;
  const total = await countLines(path);
  await withContext(async ({ runtime }) => {
    const source = path === '-' ? 'stdin' : path;
    const progress = progressLine(`submitting ${source}`, total, process.stderr, 'lines');
    const results: ItemResult[][] = [];
    const started = performance.now();
    let batch: Line[] = [];
    let batchText = 0;
    let lastLine = 0;
    let submittedLines = 0;
    const read = { lines: 0 };
    // Each batch being appended, with the idempotency keys and the line numbers it holds.
    const inFlight = new Map<Promise<void>, { keys: Set<string>; lines: number[] }>();
    // A batch whose appendMany failed as a whole (the database went away): its lines' fate is unknown.
    let failure: unknown;
    const unknownLines: number[] = [];

    // Checked here, in file order, before anything of the batch is written; then submitted while
    // the next batches are read and checked (at most BATCHES_IN_FLIGHT appends at once).
    const flush = async () => {
      if (batch.length === 0) return;
      const lines = batch;
      batch = [];
      batchText = 0;
      // A key repeated for a different request is that line's conflict wherever it falls, in this
      // batch or an earlier one, so the outcome does not depend on --batch-size.
      const checked = checkSubmissions(actions, lines.map((l) => l.submission), (i) => namesOfLine(lines[i]!.number), (i) => `line ${lines[i]!.number}`, 'each');
      // A key an earlier batch still appends: let it land first, so the earlier line is the one that created it.
      const keys = new Set(checked.flatMap((r) => (r.idempotencyKey === undefined ? [] : [r.idempotencyKey])));
      if ([...inFlight.values()].some((held) => [...keys].some((k) => held.keys.has(k)))) await settle();
      const slot = results.length;
      results.push([]);
      const appending = runtime.submitMany(checked, { itemLabel: (i) => `line ${lines[i]!.number}` }).then(
        (outcomes) => {
          // Each line has its own outcome: one the store did not take is reported, the others stand.
          results[slot] = outcomes.map((outcome, i): ItemResult => {
            const line = lines[i]!.number;
            if (outcome.ok) return { line, executionId: outcome.result.executionId, created: outcome.result.created, status: statusOf(outcome.result.snapshot) };
            const { code, message } = itemFailure(outcome.error, { detail: true });
            return { line, executionId: outcome.executionId, created: false, code, error: message };
          });
          submittedLines += lines.length;
          progress.update(submittedLines);
        },
        (err: unknown) => {
          failure ??= err;
          unknownLines.push(...lines.map((l) => l.number));
        },
      );
      const tracked: Promise<void> = appending.finally(() => inFlight.delete(tracked));
      inFlight.set(tracked, { keys, lines: lines.map((l) => l.number) });
      while (inFlight.size >= BATCHES_IN_FLIGHT) await Promise.race(inFlight.keys());
      if (failure) throw failure;
    };
    const settle = async () => {
      await Promise.all(inFlight.keys());
      if (failure) throw failure;
    };

    // Ctrl-C or SIGTERM: no further line is sent; the batches already sent finish, and what was
    // submitted is reported as at the end. A second signal stops at once, saying which lines were
    // being stored (they may or may not be).
    let interrupted: NodeJS.Signals | undefined;
    const onSignal = (signal: NodeJS.Signals) => {
      if (!interrupted) {
        interrupted = signal;
        const batches = inFlight.size;
        if (process.stderr.isTTY) process.stderr.write('\n');
        process.stderr.write(`baton: ${signal}: sending no more lines${batches > 0 ? `; waiting for the ${batches} batch${batches === 1 ? '' : 'es'} being stored` : ''} (${signal === 'SIGINT' ? 'Ctrl-C' : signal} again exits at once)\n`);
        return;
      }
      const done = results.flat();
      const sending = [...inFlight.values()].flatMap((b) => b.lines).sort((a, b) => a - b);
      const upTo = Math.max(highestLine(done), sending.at(-1) ?? 0);
      if (process.stderr.isTTY) process.stderr.write('\n');
      process.stderr.write(
        `baton: ${signal} again: exiting now, without waiting for the batches being stored. ${sending.length > 0 ? `Lines ${lineRanges(sending)} may or may not have been stored; ` : ''}` +
          `${done.length.toLocaleString('en')} other lines were submitted, and nothing after line ${upTo} was sent. ` +
          `Submit the file again to go on: ${KEYED_LINES_FOUND_AGAIN} (lines without one may be submitted twice)\n`,
      );
      if (o.json) process.stdout.write(`${toJson({ ...summary(done, started), executions: done, interrupted: { signal, afterLine: upTo, exitedAtOnce: true }, failed: { lines: sending, message: `${signal} again: exited while they were being stored` } })}\n`);
      process.exit(signal === 'SIGINT' ? 130 : 143);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    try {
      for await (const line of readLines(input, read, o.tags, namespace)) {
        if (interrupted) break;
        lastLine = line.number;
        batch.push(line);
        batchText += line.length;
        if (batch.length >= batchSize || batchText >= MAX_BATCH_TEXT) await flush();
      }
      if (!interrupted) await flush();
      await settle();
    } catch (err) {
      await Promise.all(inFlight.keys()); // the batches sent are written (or fail) before anything is reported
      const written = results.flat();
      if (process.stderr.isTTY) progress.finish(`stopped at line ${lastLine}`); // else the refusal stays one line
      if (failure === undefined && err instanceof InvalidInputError) {
        const firstUnwritten = written.length > 0 ? written.at(-1)!.line + 1 : 1;
        const done = written.length > 0 ? `; lines 1–${firstUnwritten - 1} were submitted (${written.length} executions)` : '';
        if (o.json) console.log(toJson({ ...summary(written, started), executions: written, refused: { fromLine: firstUnwritten, message: err.message } }));
        throw new BatonError(`${err.message}; nothing from line ${firstUnwritten} on was written${done}`);
      }
      // The store failed under a whole batch: name the lines that may or may not be stored.
      const cause = (failure ?? err) as Error;
      unknownLines.sort((a, b) => a - b);
      const sentUpTo = Math.max(unknownLines.at(-1) ?? 0, highestLine(written));
      const message = `${cause.message ?? String(cause)}`;
      if (o.json) console.log(toJson({ ...summary(written, started), executions: written, failed: { lines: unknownLines, message } }));
      throw new BatonError(
        `the submission failed: ${message}. Lines ${lineRanges(unknownLines)} may or may not have been stored; ` +
          `${written.length > 0 ? `${written.length} other lines were submitted` : 'no other line was submitted'}, and nothing after line ${sentUpTo} was sent. ` +
          `Submit the file again once the database is back: ${KEYED_LINES_FOUND_AGAIN} (lines without one may be submitted twice)`,
        { cause },
      );
    }
    finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
    const all = results.flat();
    const s = summary(all, started);
    if (interrupted) {
      const upTo = highestLine(all);
      progress.finish(`${interrupted}: stopped after line ${upTo}`);
      process.stderr.write(
        `baton: ${interrupted}: stopped; lines up to ${upTo} were submitted, nothing after line ${upTo} was sent. ` +
          `Submit the file again to go on: ${KEYED_LINES_FOUND_AGAIN} (lines without one are submitted again)\n`,
      );
      if (o.json) console.log(toJson({ ...s, executions: all, interrupted: { signal: interrupted, afterLine: upTo } }));
      else console.log(`submitted ${linesOf(s.submitted)} before ${interrupted}: ${outcomeCounts(s)}`);
      process.exitCode = interrupted === 'SIGINT' ? 130 : 143;
      return;
    }
    progress.finish(`${s.submitted.toLocaleString('en')} lines in ${s.seconds} s`);
    // Not an error (a nightly export may well be empty), but likely the wrong file: say so on stderr.
    if (all.length === 0) process.stderr.write(`warning: ${source} holds no executions (${read.lines === 0 ? 'it is empty' : 'every line is blank'}): nothing was submitted\n`);
    if (o.json) console.log(toJson({ ...s, executions: all }));
    else {
      console.log(
        `submitted ${linesOf(s.submitted)} in ${s.seconds} s (${s.perSecond.toLocaleString('en')}/s): ${outcomeCounts(s)}`,
      );
      for (const c of s.conflicts.slice(0, 10)) console.log(`  line ${c.line}: ${c.error}`);
      if (s.conflicts.length > 10) console.log(`  … and ${s.conflicts.length - 10} more (--json lists them all)`);
    }
    if (s.conflicts.length > 0) process.exitCode = 1;
  });
}

/**
 * `3 created, 1 already submitted (same idempotency key), 0 refused`, and the lines the store
 * failed under, which are not refusals: they may or may not be stored.
 */
function outcomeCounts(s: ReturnType<typeof summary>): string {
  const maybe = s.conflicts.filter((c) => c.code === STORE_FAILED).length;
  const counts = `${s.created.toLocaleString('en')} created, ${s.existing.toLocaleString('en')} already submitted (same idempotency key), ${(s.conflicts.length - maybe).toLocaleString('en')} refused`;
  return maybe > 0 ? `${counts}, ${maybe.toLocaleString('en')} may or may not be stored (the store failed under them: submit the file again)` : counts;
}

function summary(results: ItemResult[], started: number) {
  const seconds = (performance.now() - started) / 1000;
  const conflicts = results.filter((r) => r.error !== undefined).map((r) => ({ line: r.line, executionId: r.executionId, code: r.code!, error: r.error! }));
  return {
    submitted: results.length,
    created: results.filter((r) => r.created).length,
    existing: results.filter((r) => !r.created && r.error === undefined).length,
    conflicts,
    seconds: Number(seconds.toFixed(2)),
    perSecond: seconds > 0 ? Math.round(results.length / seconds) : 0,
  };
}

const linesOf = (n: number) => `${n.toLocaleString('en')} line${n === 1 ? '' : 's'}`;
