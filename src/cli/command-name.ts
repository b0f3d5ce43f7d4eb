// The command this process runs (`retention run`), for the `component` of its log lines
// (`"component":"cli/retention/run"`, as a host's say `"worker"`). main.ts sets it before the
// command's action runs and cliLogger (context.ts) reads it: a module of its own, so main.ts
// loads nothing more for it (`baton --help` stays light).

let current: readonly string[] = [];

/** The command's names from the top (`['retention', 'run']`). */
export function setCliCommand(names: readonly string[]): void {
  current = names;
}

/** The component of the running command's log lines: `cli/retention/run`, or `cli` before one is known. */
export const cliComponent = (): string => ['cli', ...current].join('/');
