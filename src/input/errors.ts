// The one error every front door raises for input it refuses: each problem names where it is,
// starting with the argument (`filter.since`, `input.a.b`, `--input`), and why. The GraphQL API
// answers it as BAD_USER_INPUT, the CLI prints it on one line and exits 1.
import { BatonError } from '../errors.ts';
import { formatPath, type ValueProblem } from './rules.ts';

export interface InputProblem {
  /** Where, from the argument: `filter.since`, `input.a.b`, `--key`. */
  path: string;
  message: string;
  /**
   * What the caller may choose from (`{ what: 'actions', names: [every registered action] }` for
   * an unknown one). Kept apart from `message` so a front door can decide who sees the list.
   */
  known?: { what: string; names: string[] };
}

/** `path: message`, with the known names appended (`; known actions: a, b`) unless `listKnown` is false. */
export function describeProblem(p: InputProblem, o: { listKnown?: boolean } = {}): string {
  const known = o.listKnown !== false && p.known && p.known.names.length > 0 ? `; known ${p.known.what}: ${p.known.names.join(', ')}` : '';
  return `${p.path ? `${p.path}: ` : ''}${p.message}${known}`;
}

/** Input refused before anything was written. */
export class InvalidInputError extends BatonError {
  constructor(readonly problems: InputProblem[]) {
    super(problems.map((p) => describeProblem(p)).join('; '));
  }

  /** The argument the first problem is in: `input` for `input.a.b`, `--input` for `--input (at a.b)`. */
  get argument(): string {
    return this.problems[0]?.path.split(/[.\s]/)[0] ?? '';
  }

  /** The message, with or without the lists of known names. */
  describe(o: { listKnown?: boolean } = {}): string {
    return this.problems.map((p) => describeProblem(p, o)).join('; ');
  }
}

/** Where inside an argument: `input.a.b`; for a CLI option, `--input (at a.b)`. */
export function pathIn(argument: string, path: readonly (string | number)[]): string {
  if (path.length === 0) return argument;
  return argument.startsWith('--') ? `${argument} (at ${formatPath(path)})` : `${argument}.${formatPath(path)}`;
}

/** Value problems (paths relative to the value) as input problems under `argument`. */
export const under = (argument: string, problems: readonly ValueProblem[]): InputProblem[] =>
  problems.map((p) => ({ path: pathIn(argument, p.path), message: p.message }));

/** Throws InvalidInputError when there is any problem. */
export function refuseAny(problems: readonly InputProblem[]): void {
  if (problems.length > 0) throw new InvalidInputError([...problems]);
}
