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
import { InvalidInputError, under, type InputProblem } from '../input/errors.ts';
import { nearestName } from '../input/nearest.ts';
import { namespaceProblem } from '../input/namespace.ts';
import { INT32, integerProblem, jsonProblems, printable, textProblem } from '../input/rules.ts';
import type { ExecutionRuntime, SubmitRequest, SubmitResult } from './execution-runtime.ts';

/** What a person asks for. */
export interface Submission {
  action: string;
  /** Missing means JSON null. */
  input?: unknown;
  idempotencyKey?: string;
  maxAttempts?: number;
  priority?: number;
  /** Where it lives: `default` when left out (src/input/namespace.ts). */
  namespace?: string;
}

/** The names a front door gives each field, for its error messages. Default: the GraphQL argument names. */
export type SubmissionNames = Record<Exclude<keyof Submission, 'namespace'>, string> & { namespace?: string };

export const API_NAMES: SubmissionNames = { action: 'action', input: 'input', idempotencyKey: 'idempotencyKey', maxAttempts: 'maxAttempts', priority: 'priority' };

/** Same limits as ExecutionRequested's fields (schemas/events.ts). */
export const SUBMISSION_LIMITS = { actionLength: 200, idempotencyKeyLength: 500, maxAttempts: 1_000 } as const;

/**
 * The submission as the runtime takes it, or InvalidInputError listing every problem (an input
 * that does not fit the action's schema is InvalidActionInputError, naming each field).
 */
export function checkSubmission(actions: Pick<ActionRegistry, 'get' | 'names'>, s: Submission, names: SubmissionNames = API_NAMES): SubmitRequest {
  const problems: InputProblem[] = [];
  const problem = (field: Exclude<keyof Submission, 'namespace'>, message: string | undefined) => message && problems.push({ path: names[field], message });

  const actionText = textProblem(s.action, { required: true, maxLength: SUBMISSION_LIMITS.actionLength });
  problem('action', actionText);
  const action = actionText ? undefined : actions.get(s.action);
  if (!actionText && !action) {
    const known = actions.names();
    const near = nearestName(s.action, known);
    problems.push({ path: names.action, message: `unknown action "${printable(s.action, 100)}"${near ? `; did you mean "${near}"?` : ''}`, known: { what: 'actions', names: known } });
  }
  const input = s.input === undefined ? null : s.input;
  const inputProblems = jsonProblems(input);
  problems.push(...under(names.input, inputProblems));
  if (s.idempotencyKey !== undefined) problem('idempotencyKey', textProblem(s.idempotencyKey, { required: true, maxLength: SUBMISSION_LIMITS.idempotencyKeyLength }));
  if (s.maxAttempts !== undefined) problem('maxAttempts', integerProblem(s.maxAttempts, 1, SUBMISSION_LIMITS.maxAttempts));
  if (s.priority !== undefined) problem('priority', integerProblem(s.priority, INT32.min, INT32.max));
  const namespaceText = s.namespace === undefined ? undefined : namespaceProblem(s.namespace);
  if (namespaceText) problems.push({ path: names.namespace ?? 'namespace', message: namespaceText });
  if (problems.length > 0) throw new InvalidInputError(problems);

  validateInput(action!, input); // InvalidActionInputError names each field: `input.ms: …`
  return {
    action: action!.name,
    input,
    ...(s.idempotencyKey !== undefined && { idempotencyKey: s.idempotencyKey }),
    ...(s.maxAttempts !== undefined && { maxAttempts: s.maxAttempts }),
    ...(s.priority !== undefined && { priority: s.priority }),
    ...(s.namespace !== undefined && { namespace: s.namespace }),
  };
}

/** Check, then submit: nothing is written unless every check passed. */
export async function submitExecution(
  deps: { runtime: Pick<ExecutionRuntime, 'submit'>; actions: Pick<ActionRegistry, 'get' | 'names'> },
  s: Submission,
  names: SubmissionNames = API_NAMES,
): Promise<SubmitResult> {
  return deps.runtime.submit(checkSubmission(deps.actions, s, names));
}
