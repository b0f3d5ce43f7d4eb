// working() as the consume adapters send it: an action may call ctx.heartbeat() in a tight loop,
// and one UPDATE (Postgres) or one +WPI message (NATS) per call starved the worker's own pool
// and heartbeat until it was declared lost. Per delivery, at most one signal is in flight and at
// most one is sent per interval; calls in between are folded into one sent when the interval
// ends, so the lease is never pushed out later than one interval after the last call.

/**
 * The interval for an ack-wait (visibility timeout): a tenth of it (3 s at the default 30 s), so
 * the last call's extension is at most a tenth late and the lease never runs short meanwhile.
 */
export const workingEveryMs = (ackWaitMs: number): number => Math.max(1, Math.floor(ackWaitMs / 10));

export interface ThrottledWorking {
  /** Resolves at once (the signal, if any, is sent in the background; its failure is the sender's to log). */
  working(): Promise<void>;
  /** The delivery is settled: send nothing more. */
  stop(): void;
}

export function throttleWorking(send: () => Promise<void>, everyMs: number): ThrottledWorking {
  let lastSentAt = -Infinity;
  let inFlight = false;
  let wanted = false;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;

  const flush = (): void => {
    timer = undefined;
    if (stopped || inFlight || !wanted) return;
    const wait = lastSentAt + everyMs - performance.now();
    if (wait > 0) {
      // Not unref'd would keep a stopping process alive for a signal nobody needs.
      timer = setTimeout(flush, wait);
      timer.unref();
      return;
    }
    wanted = false;
    inFlight = true;
    lastSentAt = performance.now();
    send()
      .catch(() => undefined)
      .finally(() => {
        inFlight = false;
        if (wanted && timer === undefined) flush();
      });
  };

  return {
    working() {
      if (stopped) return Promise.resolve();
      wanted = true;
      if (timer === undefined && !inFlight) flush();
      return Promise.resolve();
    },
    stop() {
      stopped = true;
      clearTimeout(timer);
      timer = undefined;
    },
  };
}
