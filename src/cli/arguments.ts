// Argument parsers shared by CLI commands: each refuses bad input with the reason. They load
// nothing heavy (no zod, no schemas): commands are defined, and their arguments checked, before
// the code that runs them is imported (main.ts). Values go through the same rules as the API's
// arguments (src/input/rules.ts, which is zod-free): what one refuses, so does the other. A
// parser throws InvalidInputError naming the option, which `baton` prints on one line
// (`baton: --input (at a.b): must not contain a NUL character`) and exits 1, without echoing
// what may be a huge value back.
import { InvalidArgumentError } from 'commander';
import { UUID } from '../ids.ts';
import { workflowIdProblem } from '../../schemas/workflow-id.ts';
import { repeatedJsonKeyProblems } from '../input/duplicate-keys.ts';
import { InvalidInputError, under } from '../input/errors.ts';
import { bigintTextProblem, dateTimeProblem, jsonProblems, textProblem, type Json } from '../input/rules.ts';
import { parseTagText, TAG_LIMITS } from '../input/tags.ts';
import { repeatable } from './repeated-options.ts';

/** `execution-<uuid>`: an execution's stream id, as baton_events and exports show it. */
const STREAM_ID = /^execution-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/i;

// The rule every front door uses (src/ids.ts): any version and variant. The uuid package's
// validate() refused ids the API and the stores accept (00000000-0000-0000-0000-000000000001).
const isUuid = (value: string) => UUID.test(value);

export const executionId = (value: string): string => {
  // Its stream id, copied from the events table or an export, names it as well.
  const stream = STREAM_ID.exec(value);
  if (stream) value = stream[1]!;
  if (!isUuid(value)) throw new InvalidArgumentError(`execution id must be a uuid, got "${value}"`);
  // Stored in lower case (streams are `execution-<id>`), as the API takes any case: `01A2…` is `01a2…`.
  return value.toLowerCase();
};

/**
 * An execution id for a command that also has a workflow counterpart: a workflow id that is not a
 * uuid (`nightly-2026-11-21`) is pointed there. (A workflow's uuid is told apart only once the
 * store says no execution has it: see notAnExecution in run/archived-notice.ts.)
 */
export const executionIdOrPointer = (workflowCommand: string) => (value: string): string => {
  if (isUuid(value) || STREAM_ID.test(value)) return executionId(value);
  if (workflowIdProblem(value) === undefined) {
    throw new InvalidArgumentError(`"${value}" is not an execution id (a uuid); for a workflow, run \`baton ${workflowCommand} ${value}\``);
  }
  return executionId(value);
};

export const workflowId = (value: string): string => {
  const problem = value === '' ? 'must not be empty' : workflowIdProblem(value);
  if (problem !== undefined) throw new InvalidArgumentError(`workflow id ${problem}, got "${value}"`);
  return value;
};

/** `--archive <dir>`, `--checkpoint <file>`: a path the file system can take; an empty one would mean the current directory. */
export const pathOption =
  (kind: 'file' | 'directory') =>
  (value: string): string => {
    if (value.trim() === '' || value.includes('\0') || value.length > 4096) throw new InvalidArgumentError(`must be a ${kind} path (no NUL bytes, at most 4096 characters)`);
    return value;
  };

const refuse = (option: string, message: string) => new InvalidInputError([{ path: option, message }]);

/** A JSON option's value, boxed: commander turns a parser's `null` into '' (so `--input null` must not return null). */
export interface JsonOptionValue {
  json: Json;
}

/** `--input '{"a":1}'`: JSON text whose value Baton can store (depth, size, no NUL or lone surrogate escapes). */
export const jsonOption =
  (option: string) =>
  (text: string): JsonOptionValue => {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (e) {
      throw refuse(option, `not valid JSON (${(e as Error).message})`);
    }
    const problems = under(option, [...repeatedJsonKeyProblems(text), ...jsonProblems(value)]);
    if (problems.length > 0) throw new InvalidInputError(problems);
    return { json: value as Json };
  };

/** `--since 2026-01-31T12:00:00Z`: an ISO 8601 date-time with a zone, years 0001 to 9999. */
export const dateTimeOption =
  (option: string) =>
  (text: string): Date => {
    const r = dateTimeProblem(text);
    if ('problem' in r) throw refuse(option, r.problem);
    return new Date(r.iso);
  };

/** Free text (`--reason`, `--key`): storable, not empty, at most `maxLength` characters. */
export const textOption =
  (option: string, maxLength: number) =>
  (text: string): string => {
    const problem = textProblem(text, { required: true, maxLength });
    if (problem) throw refuse(option, problem);
    return text;
  };

/** A position in a list (`--after`): a whole number within Postgres's bigint. */
export const positionOption =
  (option: string) =>
  (text: string): string => {
    const problem = bigintTextProblem(text);
    if (problem) throw refuse(option, `${problem} (a cursor printed by an earlier page)`);
    return text;
  };

/** Any whole number written in decimal; what range it must be in is the command's to check. */
export const integerOption =
  (option: string) =>
  (text: string): number => {
    const n = Number(text);
    if (!/^\s*-?\d+\s*$/.test(text)) throw refuse(option, `must be a whole number, got "${text.slice(0, 40)}"`);
    // Digits past 2^53 are a whole number too: too large for any option, not "not a number".
    if (!Number.isSafeInteger(n)) throw refuse(option, `is far too large (${text.trim().slice(0, 40)}): no option takes a number past 2^53`);
    return n;
  };

/**
 * `--tag customer=c-42`, repeatable: the tags so far with this one added (a key given twice
 * keeps the last). Checked by the tag rules (src/input/tags.ts) every door uses.
 */
export const tagOption = (option: string) =>
  repeatable((text: string, previous: Record<string, string> | undefined): Record<string, string> => {
    const tag = parseTagText(text);
    if ('problem' in tag) throw refuse(option, tag.problem);
    // A key holds one value: a second one would silently replace the first.
    if (previous !== undefined && Object.hasOwn(previous, tag.key)) throw refuse(option, `tag "${tag.key}" is given twice (${tag.key}=${previous[tag.key]} and ${tag.key}=${tag.value}); a key holds one value`);
    const tags = { ...previous, [tag.key]: tag.value };
    if (Object.keys(tags).length > TAG_LIMITS.maxTags) throw refuse(option, `at most ${TAG_LIMITS.maxTags} tags`);
    return tags;
  });
