// How a long-running host stops: on SIGTERM, SIGINT (Ctrl-C) or SIGHUP (its terminal closed),
// heard from its first moment (a signal while it starts stops the start), it drains — API,
// workers, executor, projector, health server, connections, and last the embedded Postgres
// it owns — then exits 0. A second signal exits at once, saying so. A drain
// that cannot finish (a database that is gone: every step waits on connections that fail)
// is given up after the workers' shutdown timeout plus DRAIN_GRACE_MS, and the process exits 1.
// A drained process that something else still holds (an action deaf to its abort signal) exits
// EXIT_AFTER_DRAIN_MS later with the drain's exit code.
import type { Logger } from 'pino';
import type { HostEnvironment, RunningHosts } from './hosts.ts';
import { INTERRUPT_SIGNALS } from './interrupt.ts';


/**
 * Beyond the workers' shutdown timeout, how long the rest of a drain may take: closing the
 * API, stopping the executor and projector, ending pools and stopping the embedded Postgres
 * take well under a second when the database answers (measured for an idle `baton dev` on a
 * 2-core machine at load 9-10: 0.12-0.28 s from the signal to "drained").
 */
export const DRAIN_GRACE_MS = 10_000;

/** The stop signals a host listens for from its first moment, so that none finds it unprepared. */
export interface StopSignals {
  /** Aborted by the first stop signal (its reason is the signal's name): what is starting gives up. */
  readonly signal: AbortSignal;
  /** The first stop signal. */
  readonly received: Promise<NodeJS.Signals>;
  /** Stop listening: from then on a signal gets its default treatment. */
  dispose(): void;
}

/**
 * Listen for SIGINT, SIGTERM and SIGHUP now. The first aborts `signal` and resolves
 * `received`; a second exits the process at once, saying so on stderr (a person pressed
 * Ctrl-C twice) and in the log.
 */
export function watchStopSignals(log: Logger): StopSignals {
  const controller = new AbortController();
  let receive: (signal: NodeJS.Signals) => void = () => undefined;
  const received = new Promise<NodeJS.Signals>((resolve) => (receive = resolve));
  const onSignal = (signal: NodeJS.Signals) => {
    if (controller.signal.aborted) {
      log.warn({ signal }, 'second signal: exiting without finishing the drain');
      process.stderr.write(`baton: ${signal} again: exiting now, without finishing the drain\n`);
      process.exit(1); // 'exit' handlers still stop an embedded Postgres this process owns
    }
    controller.abort(signal);
    receive(signal);
  };
  for (const s of INTERRUPT_SIGNALS) process.on(s, onSignal);
  return {
    signal: controller.signal,
    received,
    dispose: () => {
      for (const s of INTERRUPT_SIGNALS) process.off(s, onSignal);
    },
  };
}

export interface RunOptions {
  /** The workers' shutdown timeout (default BATON_SHUTDOWN_TIMEOUT): the drain is bounded by it plus DRAIN_GRACE_MS. */
  shutdownTimeoutMs?: number;
}

/** Run until the first stop signal, then drain (bounded). Resolves when drained; exits the process when the drain is given up. */
export async function runUntilSignalled(env: HostEnvironment, hosts: RunningHosts, stop: StopSignals, o: RunOptions = {}): Promise<void> {
  const { log } = env;
  const signal = await stop.received;
  log.info({ signal }, 'draining');
  const boundMs = (o.shutdownTimeoutMs ?? env.config.timeouts.shutdownTimeoutMs) + DRAIN_GRACE_MS;
  // Unref'd: it fires only if the process is still here by then, drained or not.
  const progress: DrainProgress = { step: 'starting' };
  const givenUp = setTimeout(() => {
    log.error({ signal, boundMs, step: progress.step }, `still not stopped this long after the signal (stuck stopping the ${progress.step}; is the database reachable?); exiting without finishing the drain`);
    process.exit(1);
  }, boundMs).unref();

  if (!(await stopHosts(env, hosts, `received ${signal}`, progress))) process.exitCode = 1;
  clearTimeout(givenUp);
  log.info({ signal }, 'drained; exiting');
  stop.dispose(); // the process is about to exit anyway
  // Drained: nothing of Baton's holds the process now. An action that ignored its abort signal
  // (its execution stays held, reclaimed once this process is gone) may still hold timers or
  // sockets; the process exits anyway, with the drain's exit code, rather than wait for it.
  setTimeout(() => {
    log.warn({ signal, afterMs: EXIT_AFTER_DRAIN_MS }, 'drained, but something still holds this process open (an action that ignores its abort signal?); exiting');
    process.exit(process.exitCode ?? 0);
  }, EXIT_AFTER_DRAIN_MS).unref();
}

/** After a finished drain, how long the process may take to exit by itself (normally it exits at once). */
const EXIT_AFTER_DRAIN_MS = 1_000;

/**
 * Stop whatever of `hosts` runs, in drain order, then close the environment. Every step runs
 * even if one before it failed (a step left out would keep the process alive); false when one failed.
 */
/** Which drain step runs now, for the message when a drain is given up. */
export interface DrainProgress {
  step: string;
}

export async function stopHosts(env: HostEnvironment, hosts: Partial<RunningHosts>, reason: string, progress: DrainProgress = { step: '' }): Promise<boolean> {
  const steps: [string, () => Promise<unknown> | undefined][] = [
    ['API', () => hosts.api?.close()],
    ['workers', () => Promise.all((hosts.workers ?? []).map((w) => w.stop(reason)))],
    ['executor', () => hosts.executor?.stop()],
    ['projector', () => hosts.projector?.stop()],
    ['health server', () => hosts.health?.close()],
    ['connections', () => env.close()],
  ];
  let ok = true;
  for (const [what, step] of steps) {
    progress.step = what;
    const t0 = performance.now();
    try {
      await step();
      env.log.debug({ step: what, ms: Math.round(performance.now() - t0) }, 'stopped');
    } catch (err) {
      env.log.error({ err, step: what }, 'error while stopping');
      ok = false;
    }
  }
  return ok;
}
