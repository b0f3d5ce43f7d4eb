// Ctrl-C (SIGINT), SIGTERM or SIGHUP during long, resumable CLI work (`retention run`,
// `eventstore copy`): the first stops it after the step in progress, said at once on stderr, so
// the command can say how far it got; a second exits at once. The exit code is then 128 + the
// signal's number (130 for Ctrl-C, 143 for SIGTERM), as a shell reports a process it killed.

/** The signals that stop a CLI command, and its exit code for each. */
export const INTERRUPT_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
export type InterruptSignal = (typeof INTERRUPT_SIGNALS)[number];
export const SIGNAL_EXIT_CODES: Record<InterruptSignal, number> = { SIGINT: 130, SIGTERM: 143, SIGHUP: 129 };

export interface GracefulStop {
  /** Aborted by the first signal: the work stops after its step in progress. */
  readonly signal: AbortSignal;
  /** The first signal received, if any: `Ctrl-C` for SIGINT. */
  received(): string | undefined;
  /** Stop listening, and set the exit code when a signal stopped the work. */
  dispose(): void;
}

/** Listen now; `step` names what the first signal lets finish ("batch", "batch of events"). */
export function stopGracefullyOnSignal(step: string): GracefulStop {
  const controller = new AbortController();
  let first: InterruptSignal | undefined;
  const name = (s: string) => (s === 'SIGINT' ? 'Ctrl-C' : s);
  const onSignal = (s: InterruptSignal) => {
    if (first) {
      process.stderr.write(`\nbaton: ${name(s)} again: exiting now; running the same command again goes on from where it stopped\n`);
      process.exit(SIGNAL_EXIT_CODES[s]);
    }
    first = s;
    process.stderr.write(`\nbaton: ${name(s)}: stopping after the ${step} in progress (${name(s)} again exits at once)\n`);
    controller.abort(s);
  };
  for (const s of INTERRUPT_SIGNALS) process.on(s, onSignal);
  return {
    signal: controller.signal,
    received: () => first && name(first),
    dispose: () => {
      for (const s of INTERRUPT_SIGNALS) process.off(s, onSignal);
      if (first) process.exitCode = SIGNAL_EXIT_CODES[first];
    },
  };
}
