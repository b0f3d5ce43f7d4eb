// One run's abort signal: aborted when the caller's signal aborts or when the run's own time
// limit passes, whichever is first; dispose() leaves no timer and no listener behind.
//
// Not AbortSignal.any([caller, AbortSignal.timeout(ms)]): the caller's signal is often a
// worker-wide shutdown signal that lives as long as the process, and on Node 20 every
// AbortSignal.any() over a long-lived signal stays registered on it (nodejs/node#55351,
// fixed later in 22.x). Here the listener is removed when the run ends, and the timer is
// cleared instead of being left to fire into nothing.

export interface RunSignal {
  signal: AbortSignal;
  /** True once the time limit (not the caller) aborted the signal. */
  timedOut(): boolean;
  /** Remove the listener on the caller's signal and clear the timer. Idempotent. */
  dispose(): void;
}

/**
 * `timeoutMs` undefined: no time limit. `onTimeout` builds the abort reason, so code that
 * rethrows `signal.reason` throws the typed timeout error.
 */
export function runSignal(parent: AbortSignal, timeoutMs: number | undefined, onTimeout: () => unknown): RunSignal {
  // No time limit: the caller's signal is the run's (a controller, a listener and their removal
  // per run were ~1% of the hosts' CPU in `baton bench`, where no action has a timeout).
  if (timeoutMs === undefined) return { signal: parent, timedOut: () => false, dispose: () => undefined };
  const controller = new AbortController();
  let timedOut = false;
  const onParentAbort = () => controller.abort(parent.reason);
  let timer: NodeJS.Timeout | undefined;
  if (parent.aborted) {
    controller.abort(parent.reason);
  } else {
    parent.addEventListener('abort', onParentAbort, { once: true });
    if (timeoutMs !== undefined) {
      timer = setTimeout(() => {
        timedOut = true;
        controller.abort(onTimeout());
      }, timeoutMs);
    }
  }
  return {
    signal: controller.signal,
    timedOut: () => timedOut,
    dispose: () => {
      parent.removeEventListener('abort', onParentAbort);
      clearTimeout(timer);
    },
  };
}
