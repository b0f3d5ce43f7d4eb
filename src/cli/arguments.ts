// Argument parsers shared by CLI commands: each refuses bad input with the reason.
import { InvalidArgumentError } from 'commander';
import { validate as isUuid } from 'uuid';
import { WorkflowId } from '../../schemas/workflow.ts';

export const executionId = (value: string): string => {
  if (!isUuid(value)) throw new InvalidArgumentError(`execution id must be a uuid, got "${value}"`);
  return value;
};

export const workflowId = (value: string): string => {
  const r = WorkflowId.safeParse(value);
  if (!r.success) throw new InvalidArgumentError(`workflow id ${r.error.issues[0]!.message}, got "${value}"`);
  return value;
};
