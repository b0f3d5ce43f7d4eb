// Why a worker stopped a run before its action returned, each leading to its own record: a limit
// (ExecutionTimedOut), a cancel (ExecutionCancelled), or being out of touch (the baton handed back).

/** Why this worker stopped a run on its own: a limit the history will name. */
export class LimitReached extends Error {
  constructor(
    readonly limit: 'start-to-close' | 'heartbeat',
    readonly deadline: string,
  ) {
    super(`the run passed its ${limit} limit at ${deadline}`);
  }
}

/**
 * Why this worker stopped a run on its own because it lost touch with the database: for long enough
 * that the executor may count it lost and start the next attempt elsewhere. Its baton is handed back
 * (OwnershipReleased, refused if the executor reclaimed it first), never recorded as a failure.
 */
export class OutOfTouch extends Error {}

/** Why this worker stopped a run because someone asked: the reason goes into ExecutionCancelled. */
export class CancelRequested extends Error {
  constructor(readonly reason: string) {
    super(`cancel requested: ${reason}`);
  }
}
