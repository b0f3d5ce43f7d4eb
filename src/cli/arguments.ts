// Argument parsers shared by CLI commands: each refuses bad input with the reason. They load
// nothing heavy (no zod, no schemas): commands are defined, and their arguments checked, before
// the code that runs them is imported (main.ts).
import { InvalidArgumentError } from 'commander';
import { validate as isUuid } from 'uuid';
import { workflowIdProblem } from '../../schemas/workflow-id.ts';

export const executionId = (value: string): string => {
  if (!isUuid(value)) throw new InvalidArgumentError(`execution id must be a uuid, got "${value}"`);
  return value;
};

/**
 * An execution id for a command that also has a workflow counterpart: a workflow id that is not a
 * uuid (`nightly-2026-11-21`) is pointed there. (A workflow's uuid is told apart only once the
 * store says no execution has it: see notAnExecution in run/executions.ts.)
 */
export const executionIdOrPointer = (workflowCommand: string) => (value: string): string => {
  if (isUuid(value)) return value;
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
