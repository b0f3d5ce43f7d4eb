// The checker's defaults, in a module of their own so that `baton verify`'s definition can show
// them without loading the checker (src/cli/main.ts loads a command's code only when it runs).

/** A non-final execution this far past its deadline (or an undecided retry) is stuck. */
export const DEFAULT_STUCK_AFTER_MS = 60_000;
