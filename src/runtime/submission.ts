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
import { InvalidInputError, under, type InputProblem } from '../input/errors.ts';
import { nearestName } from '../input/nearest.ts';
import { INT32, integerProblem, jsonProblems, printable, sameJson, textProblem } from '../input/rules.ts';
import { tagsProblems } from '../input/tags.ts';
import { actionVersionProblem, splitActionRef } from '../input/action-versions.ts';
import type { ExecutionRuntime, SubmitOutcome, SubmitRequest, SubmitResult } from './execution-runtime.ts';

/** What a person asks for. */
export interface Submission {
  /** The action's name; `name@version` pins a version, like `actionVersion`. */
  action: string;
  /** Missing means JSON null. */
  input?: unknown;
  idempotencyKey?: string;
  maxAttempts?: number;
  priority?: number;
  /** Pin the action version every attempt runs on (README: Versioned actions); absent: the newest a live worker offers. */
  actionVersion?: number;
  /** String key-values to find it by (src/input/tags.ts). */
  tags?: Record<string, string>;
}

/** The names a front door gives each field, for its error messages. Default: the GraphQL argument names. */
export type SubmissionNames = Record<keyof Submission, string>;

export const API_NAMES: SubmissionNames = { action: 'action', input: 'input', idempotencyKey: 'idempotencyKey', maxAttempts: 'maxAttempts', priority: 'priority', tags: 'tags', actionVersion: 'actionVersion' };

/** The names of a batch's item `index`, under `argument`: `inputs.3.input.ms`. */
export const apiItemNames = (argument: string) => (index: number): SubmissionNames =>
  Object.fromEntries(Object.entries(API_NAMES).map(([k, v]) => [k, `${argument}.${index}.${v}`])) as SubmissionNames;

/** Same limits as ExecutionRequested's fields (schemas/events.ts). */
export const SUBMISSION_LIMITS = { actionLength: 200, idempotencyKeyLength: 500, maxAttempts: 1_000 } as const;

/**
 * The submission as the runtime takes it, or InvalidInputError listing every problem (an input
 * that does not fit the action's schema is InvalidActionInputError, naming each field).
 */
export function checkSubmission(actions: Pick<ActionRegistry, 'get' | 'names'>, s: Submission, names: SubmissionNames = API_NAMES): SubmitRequest {
  const problems: InputProblem[] = [];
  const problem = (field: keyof Submission, message: string | undefined) => message && problems.push({ path: names[field], message });

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
  const inputProblems = jsonProblems(input);
  problems.push(...under(names.input, inputProblems));
  if (s.idempotencyKey !== undefined) problem('idempotencyKey', textProblem(s.idempotencyKey, { required: true, maxLength: SUBMISSION_LIMITS.idempotencyKeyLength }));
  if (s.maxAttempts !== undefined) problem('maxAttempts', integerProblem(s.maxAttempts, 1, SUBMISSION_LIMITS.maxAttempts));
  if (s.priority !== undefined) problem('priority', integerProblem(s.priority, INT32.min, INT32.max));
  if (s.tags !== undefined) problems.push(...under(names.tags, tagsProblems(s.tags)));
  if (problems.length > 0) throw new InvalidInputError(problems);

  validateInput(action!, input); // InvalidActionInputError names each field: `input.ms: …`
  return {
    action: action!.name,
    input,
    ...(s.idempotencyKey !== undefined && { idempotencyKey: s.idempotencyKey }),
    ...(s.maxAttempts !== undefined && { maxAttempts: s.maxAttempts }),
    ...(s.priority !== undefined && { priority: s.priority }),
    ...(version !== undefined && { actionVersion: version }),
    ...(s.tags !== undefined && Object.keys(s.tags).length > 0 && { tags: s.tags }),
  };
}

/** A batch's problems shown at most: a file with a systematic mistake would otherwise repeat it on every line. */
const MAX_BATCH_PROBLEMS = 10;

/**
 * Every submission of a batch checked as checkSubmission checks one, each item's problems named
 * by `namesOf(index)`; and an idempotency key used twice in the batch for different requests
 * (which could only ever give one of them). Any problem refuses the whole batch: InvalidInputError
 * with the first problems found, so nothing of a batch with a bad item is written.
 */
export function checkSubmissions(actions: Pick<ActionRegistry, 'get' | 'names'>, batch: readonly Submission[], namesOf: (index: number) => SubmissionNames): SubmitRequest[] {
  const problems: InputProblem[] = [];
  const checked: SubmitRequest[] = [];
  const checkedOf = new Map<number, SubmitRequest>();
  const firstOfKey = new Map<string, number>();
  for (let i = 0; i < batch.length && problems.length < MAX_BATCH_PROBLEMS; i++) {
    const names = namesOf(i);
    let request: SubmitRequest;
    try {
      request = checkSubmission(actions, batch[i]!, names);
    } catch (err) {
      if (err instanceof InvalidInputError) problems.push(...err.problems);
      else if (err instanceof InvalidActionInputError) problems.push(...err.issues.map((issue) => ({ path: issue.path.replace(/^input/, names.input), message: issue.message })));
      else throw err;
      continue;
    }
    checked.push(request);
    checkedOf.set(i, request);
    const key = request.idempotencyKey;
    if (key === undefined) continue;
    const first = firstOfKey.get(key);
    if (first === undefined) firstOfKey.set(key, i);
    else if (!sameJson({ ...checkedOf.get(first), idempotencyKey: key }, request)) {
      problems.push({ path: names.idempotencyKey, message: `the same key as item ${first} of this batch with a different request (a key gives one execution)` });
    }
  }
  if (problems.length > 0) throw new InvalidInputError(problems.slice(0, MAX_BATCH_PROBLEMS));
  return checked;
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
): Promise<SubmitOutcome[]> {
  return deps.runtime.submitMany(checkSubmissions(deps.actions, batch, namesOf));
}

/** Check, then submit: nothing is written unless every check passed. */
export async function submitExecution(
  deps: { runtime: Pick<ExecutionRuntime, 'submit'>; actions: Pick<ActionRegistry, 'get' | 'names'> },
  s: Submission,
  names: SubmissionNames = API_NAMES,
): Promise<SubmitResult> {
  return deps.runtime.submit(checkSubmission(deps.actions, s, names));
}
