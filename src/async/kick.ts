// One actor's work run on demand ("kicks"), as the workflow orchestrator and the schedule host
// drive theirs: a kick while a round runs asks for one more (kicks coalesce, never overlap), and
// a failed round is tried again after the actor's own backoff. What a round does is the host's.
import type { Backoff } from './backoff.ts';

export interface Kicked {
  readonly id: string;
  running?: Promise<void>;
  again: boolean;
  readonly backoff: Backoff;
}

export interface KickOptions<T extends Kicked> {
  signal: AbortSignal;
  /** Whether kicks reach this actor now (caught up, still followed). */
  active(t: T): boolean;
  /** One round of work; `'done'` when the actor needs no more (it left the host). */
  round(t: T): Promise<'done' | void>;
  /** A round threw: log it (it is retried after `retryInMs`). */
  failed(t: T, err: unknown, retryInMs: number): void;
}

export function createKick<T extends Kicked>(o: KickOptions<T>): (t: T) => void {
  const kick = (t: T): void => {
    if (o.signal.aborted || !o.active(t)) return;
    if (t.running) {
      t.again = true;
      return;
    }
    t.running = (async () => {
      try {
        do {
          t.again = false;
          if ((await o.round(t)) === 'done') return;
        } while (t.again && !o.signal.aborted);
        t.backoff.reset();
      } catch (err) {
        o.failed(t, err, t.backoff.nextMs);
        void t.backoff.wait(o.signal).then(() => kick(t));
      } finally {
        t.running = undefined;
      }
    })();
  };
  return kick;
}

/**
 * Once the host's follower has caught up, kick every followed actor, then again every
 * `sweepEveryMs` (a safety net for a change that reached no listener; 0: never). `stop()` ends
 * the sweeps and waits for the rounds running now (abort the kicks' signal first).
 */
export function kickWhenCaughtUp<T extends Kicked>(o: {
  caughtUp: Promise<void>;
  followed: ReadonlyMap<string, T>;
  kick: (t: T) => void;
  sweepEveryMs: number;
  /** Runs first, when the follower has caught up (the host marks itself caught up and says so). */
  onCaughtUp(): void;
}): { ready: Promise<void>; stop(): Promise<void> } {
  let caughtUp = false;
  const ready = o.caughtUp.then(() => {
    caughtUp = true;
    o.onCaughtUp();
    for (const t of [...o.followed.values()]) o.kick(t);
  });
  const sweep = o.sweepEveryMs > 0 ? setInterval(() => caughtUp && o.followed.forEach((t) => o.kick(t)), o.sweepEveryMs) : undefined;
  sweep?.unref();
  return {
    ready,
    async stop() {
      clearInterval(sweep);
      await Promise.all([...o.followed.values()].map((t) => t.running));
    },
  };
}
