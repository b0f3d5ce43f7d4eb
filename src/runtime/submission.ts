// The one way a person's request becomes an execution, whichever door it came through: GraphQL
// `submitExecution`, `baton submit`, or a library caller holding an action registry. Every
// problem is found before anything is written, each named the way that door names its
// arguments (`idempotencyKey` for the API, `--key` for the CLI): the action must be known (an
// unknown one says which it probably meant, and lists the known ones apart, see InputProblem),
// the input must be storable JSON that fits the action's schema, and the options within range.
// The runtime's own submit (the workflow orchestrator's path, which has no registry) checks the
// same limits through the event catalog.
import type { ActionRegistry } from '../actions/registry.ts';
import { validateInput } from '../actions/registry.ts';
import { InvalidActionInputError } from '../actions/action.ts';
import { BatonError, IdempotencyKeyConflictError } from '../errors.ts';
import { InvalidInputError, under, type InputProblem } from '../input/errors.ts';
import { nearestName } from '../input/nearest.ts';
import { DEFAULT_NAMESPACE, namespaceProblem } from '../input/namespace.ts';
import { INT32, JSON_LIMITS, integerProblem, jsonProblems, printable, textProblem } from '../input/rules.ts';
import { tagsProblems } from '../input/tags.ts';
import { actionVersionProblem, splitActionRef } from '../input/action-versions.ts';
import { DEFAULT_MAX_ATTEMPTS, type ExecutionRuntime, type SubmitOutcome, type SubmitRequest, type SubmitResult } from './execution-runtime.ts';
import { keyedDifferences, requestedDataOf } from './requested-data.ts';

/** What a person asks for. */
export interface Submission {
  /** The action's name; `name@version` pins a version, like `actionVersion`. */
  action: string;
  /** Missing means JSON null. */
  input?: unknown;
  idempotencyKey?: string;
  maxAttempts?: number;
  priority?: number;
  /** Where it lives: `default` when left out (src/input/namespace.ts). */
  namespace?: string;
  /** Pin the action version every attempt runs on (README: Versioned actions); absent: the newest a live worker offers. */
  actionVersion?: number;
  /** String key-values to find it by (src/input/tags.ts). */
  tags?: Record<string, string>;
}

/** The names a front door gives each field, for its error messages. Default: the GraphQL argument names. */
export type SubmissionNames = Record<Exclude<keyof Submission, 'namespace'>, string> & { namespace?: string };

export const API_NAMES: SubmissionNames = { action: 'action', input: 'input', idempotencyKey: 'idempotencyKey', maxAttempts: 'maxAttempts', priority: 'priority', tags: 'tags', actionVersion: 'actionVersion' };

/** The names of a batch's item `index`, under `argument`: `inputs.3.input.ms`. */
export const apiItemNames = (argument: string) => (index: number): SubmissionNames =>
  Object.fromEntries(Object.entries({ ...API_NAMES, namespace: 'namespace' }).map(([k, v]) => [k, `${argument}.${index}.${v}`])) as SubmissionNames;

/** Same limits as ExecutionRequested's fields (schemas/events.ts). */
export const SUBMISSION_LIMITS = { actionLength: 200, idempotencyKeyLength: 500, maxAttempts: 1_000 } as const;

/**
 * The submission as the runtime takes it, or InvalidInputError listing every problem (an input
 * that does not fit the action's schema is InvalidActionInputError, naming each field).
 */
export function checkSubmission(actions: Pick<ActionRegistry, 'get' | 'names'>, given: Submission, names: SubmissionNames = API_NAMES): SubmitRequest {
  const s = withoutNulls(given);
  const problems: InputProblem[] = [];
  const problem = (field: Exclude<keyof Submission, 'namespace'>, message: string | undefined) => message && problems.push({ path: names[field], message });

  let actionText = textProblem(s.action, { required: true, maxLength: SUBMISSION_LIMITS.actionLength });
  // `name@version` is the same pin as actionVersion, in one word (`baton submit core.echo@2`).
  const ref = actionText ? undefined : splitActionRef(s.action);
  if (ref && 'problem' in ref) actionText = ref.problem;
  problem('action', actionText);
  const name = ref && 'action' in ref ? ref.action : s.action;
  let version = s.actionVersion;
  if (version !== undefined) problem('actionVersion', actionVersionProblem(version));
  if (ref && 'version' in ref && ref.version !== undefined) {
    if (version !== undefined && version !== ref.version) problem('actionVersion', `${version} contradicts the version in ${names.action} "${printable(s.action, 100)}"`);
    version = ref.version;
  }
  const action = actionText ? undefined : actions.get(name);
  if (!actionText && !action) {
    const known = actions.names();
    const near = nearestName(name, known);
    problems.push({ path: names.action, message: `unknown action "${printable(name, 100)}"${near ? `; did you mean "${near}"?` : ''}`, known: { what: 'actions', names: known } });
  }
  const input = s.input === undefined ? null : s.input;
  const inputProblems = jsonProblems(input, { ...JSON_LIMITS, exactIntegers: true });
  problems.push(...under(names.input, inputProblems));
  if (s.idempotencyKey !== undefined) problem('idempotencyKey', textProblem(s.idempotencyKey, { required: true, maxLength: SUBMISSION_LIMITS.idempotencyKeyLength }));
  if (s.maxAttempts !== undefined) problem('maxAttempts', integerProblem(s.maxAttempts, 1, SUBMISSION_LIMITS.maxAttempts));
  if (s.priority !== undefined) problem('priority', integerProblem(s.priority, INT32.min, INT32.max));
  const namespaceText = s.namespace === undefined ? undefined : namespaceProblem(s.namespace);
  if (namespaceText) problems.push({ path: names.namespace ?? 'namespace', message: namespaceText });
  if (s.tags !== undefined) problems.push(...under(names.tags, tagsProblems(s.tags)));
  if (problems.length > 0) throw new InvalidInputError(problems);

  validateInput(action!, input); // InvalidActionInputError names each field: `input.ms: …`
  return {
    action: action!.name,
    input,
    ...(s.idempotencyKey !== undefined && { idempotencyKey: s.idempotencyKey }),
    ...(s.maxAttempts !== undefined && { maxAttempts: s.maxAttempts }),
    ...(s.priority !== undefined && { priority: s.priority }),
    ...(s.namespace !== undefined && { namespace: s.namespace }),
    ...(version !== undefined && { actionVersion: version }),
    ...(s.tags !== undefined && Object.keys(s.tags).length > 0 && { tags: s.tags }),
  };
}

const OPTIONAL_FIELDS = ['idempotencyKey', 'maxAttempts', 'priority', 'namespace', 'actionVersion', 'tags'] as const;

/**
 * An optional field given as null is absent, at every door alike: GraphQL's nullable arguments
 * read it so, and a JSON export (a file line, a library caller's object) writes null for "none".
 * (`input: null` stays: it is the input JSON null.)
 */
function withoutNulls(s: Submission): Submission {
  if (!OPTIONAL_FIELDS.some((f) => (s as unknown as Record<string, unknown>)[f] === null)) return s;
  const copy = { ...s } as Record<string, unknown>;
  for (const f of OPTIONAL_FIELDS) if (copy[f] === null) delete copy[f];
  return copy as unknown as Submission;
}

/** A batch's problems shown at most: a file with a systematic mistake would otherwise repeat it on every line. */
const MAX_BATCH_PROBLEMS = 10;

/**
 * Every submission of a batch checked as checkSubmission checks one, each item's problems named
 * by `namesOf(index)`; and an idempotency key used twice in the batch for different requests
 * (which could only ever give one of them). Any problem refuses the whole batch: InvalidInputError
 * with the first problems found, so nothing of a batch with a bad item is written.
 */
export function checkSubmissions(
  actions: Pick<ActionRegistry, 'get' | 'names'>,
  batch: readonly Submission[],
  namesOf: (index: number) => SubmissionNames,
  itemLabel: (index: number) => string = (i) => `item ${i} of this batch`,
  /** `refuse` (the API's, the client's): refuse the batch. `each`: leave it to submitMany, which refuses the later request alone. */
  repeatedKeys: 'refuse' | 'each' = 'refuse',
): SubmitRequest[] {
  const problems: InputProblem[] = [];
  const checked: (SubmitRequest | undefined)[] = [];
  for (let i = 0; i < batch.length && problems.length < MAX_BATCH_PROBLEMS; i++) {
    const names = namesOf(i);
    try {
      const item = batch[i];
      if (typeof item !== 'object' || item === null || Array.isArray(item)) throw new InvalidInputError([{ path: names.action.replace(/[.:\s]*action$/, '') || `item ${i}`, message: 'must be an object like {"action": "core.noop", "input": {}}' }]);
      checked.push(checkSubmission(actions, item, names));
    } catch (err) {
      if (err instanceof InvalidInputError) problems.push(...err.problems);
      else if (err instanceof InvalidActionInputError) problems.push(...err.issues.map((issue) => ({ path: issue.path.replace(/^input/, names.input), message: issue.message })));
      else throw err;
      checked.push(undefined);
    }
  }
  if (repeatedKeys === 'refuse') problems.push(...repeatedKeyProblems(checked, namesOf, itemLabel));
  if (problems.length > 0) throw new InvalidInputError(problems.slice(0, MAX_BATCH_PROBLEMS));
  return checked as SubmitRequest[];
}

/**
 * An idempotency key used twice in one batch for different requests (it could only ever give one
 * of them), named at the later use: `the same key as line 5 …`. Different as a key found in the
 * store would be (requested-data.ts), so a batch refuses what a later batch would refuse, no more.
 * Checked requests only (undefined: refused already).
 */
export function repeatedKeyProblems(requests: readonly (SubmitRequest | undefined)[], namesOf: (index: number) => SubmissionNames, itemLabel: (index: number) => string): InputProblem[] {
  const problems: InputProblem[] = [];
  const firstOfKey = new Map<string, number>();
  const recorded = (request: SubmitRequest) => requestedDataOf(request, DEFAULT_MAX_ATTEMPTS);
  requests.forEach((request, i) => {
    const key = request?.idempotencyKey;
    if (key === undefined) return;
    // A key is unique within its namespace: the same key in two namespaces is two executions.
    const scoped = JSON.stringify([request!.namespace ?? DEFAULT_NAMESPACE, key]);
    const first = firstOfKey.get(scoped);
    if (first === undefined) {
      firstOfKey.set(scoped, i);
      return;
    }
    const differs = keyedDifferences(recorded(requests[first]!), recorded(request!));
    if (differs.length > 0) problems.push({ path: namesOf(i).idempotencyKey, message: `the same key as ${itemLabel(first)} with a different request (it differs in ${differs.join(', ')}; a key gives one execution)` });
  });
  return problems;
}

/** How a front door reports a batch item that was not submitted (its SubmitOutcome's error). */
export interface ItemFailure {
  /**
   * IDEMPOTENCY_CONFLICT: its key names an earlier, different request (certainly not stored).
   * REFUSED: the event store refused it (certainly not stored). STORE_FAILED: the store failed
   * while storing it, so it may or may not be stored: submit it again, safely with a key.
   */
  code: 'IDEMPOTENCY_CONFLICT' | 'REFUSED' | 'STORE_FAILED';
  message: string;
}

/** `detail`: include an unexpected failure's own message (the CLI and the library; the API keeps it in its log). */
export function itemFailure(error: Error, o: { detail: boolean }): ItemFailure {
  if (error instanceof IdempotencyKeyConflictError) return { code: 'IDEMPOTENCY_CONFLICT', message: error.message };
  if (error instanceof BatonError) return { code: 'REFUSED', message: error.message };
  const why = o.detail ? ` (${error.message})` : '';
  return { code: 'STORE_FAILED', message: `the event store failed while storing it${why}, so it may or may not be stored: submit it again (with an idempotency key that is safe)` };
}

/**
 * Check a batch, then submit it with one appendMany (ExecutionRuntime.submitMany): nothing is
 * written unless every item passed. Each item then has its own outcome: created, found by its
 * key (`created: false`), or refused alone (its key names an earlier, different execution).
 */
export async function submitExecutions(
  deps: { runtime: Pick<ExecutionRuntime, 'submitMany'>; actions: Pick<ActionRegistry, 'get' | 'names'> },
  batch: readonly Submission[],
  namesOf: (index: number) => SubmissionNames,
  itemLabel?: (index: number) => string,
): Promise<SubmitOutcome[]> {
  return deps.runtime.submitMany(checkSubmissions(deps.actions, batch, namesOf, itemLabel));
}

/** Check, then submit: nothing is written unless every check passed. */
export async function submitExecution(
  deps: { runtime: Pick<ExecutionRuntime, 'submit'>; actions: Pick<ActionRegistry, 'get' | 'names'> },
  s: Submission,
  names: SubmissionNames = API_NAMES,
): Promise<SubmitResult> {
  return deps.runtime.submit(checkSubmission(deps.actions, s, names));
}
