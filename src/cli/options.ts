// Checks of command-line option values, in one place: each refuses bad input with the reason,
// and commander names the option (`error: option '--since <time>' argument 'yesterday' is
// invalid. must be an ISO time …`). Plain checks with no dependencies but commander, so the
// command definitions that use them stay cheap to load.
import { InvalidArgumentError, type Command } from 'commander';
import { namespaceProblem, parseNamespaceList } from '../input/namespace.ts';
import { MAX_DURATION_MS } from '../config-values.ts';
import { WorkerId } from '../../schemas/events.ts';

/** An integer from `min` to `max`. */
export const intFrom = (min: number, max: number) => (value: string): number => {
  const n = Number(value);
  if (!/^-?\d+$/.test(value.trim()) || !Number.isInteger(n) || n < min || n > max) {
    throw new InvalidArgumentError(`must be an integer from ${min} to ${max}`);
  }
  return n;
};

/** A name to filter by (an action, a worker id): not blank, no control characters, at most `max` characters. */
export const filterText = (max: number) => (value: string): string => {
  if (value.trim() === '') throw new InvalidArgumentError('must not be empty');
  if (value.length > max) throw new InvalidArgumentError(`must be at most ${max} characters (got ${value.length})`);
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(value)) throw new InvalidArgumentError('must not contain control characters');
  return value;
};

/** A worker id as the event catalog takes it (schemas/events.ts WorkerId): refused at once, before the worker starts. */
export const workerIdArg = (value: string): string => {
  const r = WorkerId.safeParse(value);
  if (!r.success) throw new InvalidArgumentError(`${r.error.issues[0]!.message} (1 to 200 characters)`);
  return value;
};

/**
 * A time limit in ms (a drain's grace period, a --wait's --timeout): at most 7 days, as
 * BATON_SHUTDOWN_TIMEOUT. Node's timers fire at once past 2^31-1 ms, so a longer wait gave up at once.
 */
export const durationMsArg = (value: string): number => {
  const ms = Number(value);
  if (!/^\s*\d+\s*$/.test(value) || !Number.isSafeInteger(ms) || ms < 1 || ms > MAX_DURATION_MS) {
    throw new InvalidArgumentError(`must be a whole number of milliseconds from 1 to ${MAX_DURATION_MS} (7 days), written in digits`);
  }
  return ms;
};
export const shutdownTimeoutArg = durationMsArg;

/** A TCP port, in digits: Number() would read '' and ' ' as 0 (a random port) and 0x2F as 47. */
export const portArg = (value: string): number => {
  if (!/^\s*\d{1,5}\s*$/.test(value) || Number(value) > 65_535) throw new InvalidArgumentError('must be a port number (0-65535; 0 picks a free one), written in digits');
  return Number(value);
};

/** An address to listen on: an IP address or a host name (whether it resolves is found when listening). */
export const listenHostArg = (value: string): string => {
  if (value.length === 0 || value.length > 253 || !/^[A-Za-z0-9.:%_-]+$/.test(value)) {
    throw new InvalidArgumentError('must be an IP address or a host name, such as 127.0.0.1 or 0.0.0.0');
  }
  return value;
};

export const positiveInt = (value: string): number => {
  const n = Number(value);
  // Digits only: Number() also reads 1e300 and 0x10, which nobody means as a count.
  if (!/^\s*\d+\s*$/.test(value) || !Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError(`must be a whole number from 1 to ${Number.MAX_SAFE_INTEGER}, written in digits`);
  return n;
};

/** The option's flag when the user gave it on the command line, else undefined (a default). */
export function givenOption(cmd: Command, key: string, flag: string): string | undefined {
  return cmd.getOptionValueSource(key) === 'cli' ? flag : undefined;
}

/** A namespace name (src/input/namespace.ts): refused at once, naming the option. */
export const namespaceName = (value: string): string => {
  const problem = namespaceProblem(value);
  if (problem) throw new InvalidArgumentError(problem);
  return value;
};

/** A comma-separated list of namespace names (`a,b`). */
export const namespaceNames = (value: string): string[] => {
  const r = parseNamespaceList(value);
  if (!r.ok) throw new InvalidArgumentError(r.problem);
  return r.names;
};
