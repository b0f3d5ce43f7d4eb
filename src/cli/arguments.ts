// Argument parsers shared by CLI commands: each refuses bad input with the reason.
import { InvalidArgumentError } from 'commander';
import { validate as isUuid } from 'uuid';

export const executionId = (value: string): string => {
  if (!isUuid(value)) throw new InvalidArgumentError(`execution id must be a uuid, got "${value}"`);
  return value;
};
