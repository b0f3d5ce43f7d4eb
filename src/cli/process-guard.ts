// What a host process does when code running in it (an action, usually) ends it behind Baton's
// back: an exception thrown from a timer or callback, a promise rejected with nobody listening,
// or a plain `process.exit(0)`. Node's defaults print a bare stack to stderr (or nothing, with
// exit code 0), so neither the log nor a restart-on-failure supervisor learnt anything, and the
// runs the process held waited three heartbeat intervals to be reclaimed. Only the CLI's hosts
// install this: a library must not take over its user's process (startWorker documents it).
import type { Logger } from 'pino';
import { toErrorInfo } from '../actions/action-errors.ts';
import type { LivenessStore } from '../liveness/liveness-store.ts';
import type { WorkerHost } from '../worker/worker-host.ts';

/** How long the exception path may spend marking its workers gone before it exits anyway. */
const EXPIRE_WITHIN_MS = 2_000;

export interface ProcessGuard {
  dispose(): void;
}

/**
 * From now until dispose(): an uncaught exception (or unhandled rejection) is logged as fatal,
 * naming the workers and their runs in flight; their liveness rows are made stale at once so the
 * executor reclaims those runs now, not after the staleness limit; and the process exits 1. An
 * exit with code 0 that no stop signal asked for is logged so and turned into exit code 1.
 */
export function guardProcess(o: { log: Logger; workers: () => readonly WorkerHost[]; liveness: Pick<LivenessStore, 'expire'>; stopping: () => boolean }): ProcessGuard {
  let fatal = false;
  const holding = () => o.workers().map((w) => ({ workerId: w.workerId, inFlight: w.inFlight() }));

  const onUncaught = (err: unknown, origin: NodeJS.UncaughtExceptionOrigin) => {
    if (fatal) return; // a second one while the first is handled: the first decides
    fatal = true;
    const workers = holding();
    o.log.fatal(
      { err, origin, workers },
      `${origin === 'unhandledRejection' ? 'a promise rejected with no handler' : 'an uncaught exception'} (thrown by an action's timer or callback?): exiting with code 1; this process's runs are reclaimed at once`,
    );
    const { type, message } = toErrorInfo(err); // never throws, whatever was thrown
    process.stderr.write(`baton: fatal: ${type}: ${message} (${origin}); exiting\n`);
    const expired = Promise.allSettled(workers.map((w) => o.liveness.expire(w.workerId)));
    const timeout = new Promise((resolve) => setTimeout(resolve, EXPIRE_WITHIN_MS).unref());
    void Promise.race([expired, timeout]).finally(() => process.exit(1));
  };

  const onExit = (code: number) => {
    if (fatal || code !== 0 || o.stopping()) return;
    // Synchronous only, here: the log's destination writes synchronously (src/log.ts).
    o.log.fatal({ workers: holding() }, 'the process is exiting with code 0 though no stop signal came (process.exit() called by an action or a library?): exit code 1 instead; its runs are reclaimed once its heartbeats go stale');
    process.exitCode = 1;
  };

  process.on('uncaughtException', onUncaught);
  process.on('exit', onExit);
  return {
    dispose() {
      process.off('uncaughtException', onUncaught);
      process.off('exit', onExit);
    },
  };
}
