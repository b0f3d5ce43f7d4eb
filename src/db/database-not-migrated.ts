// Kept apart from connect.ts, as database-unavailable.ts is: the package root exports it.
import { BatonError } from '../errors.ts';

/** BATON_MIGRATE=off, and the database lacks what this build needs; the message lists it. */
export class DatabaseNotMigratedError extends BatonError {
  constructor(
    where: string,
    readonly pending: readonly string[],
  ) {
    const shown = pending.length > 5 ? `${pending.slice(0, 5).join(', ')} and ${pending.length - 5} more` : pending.join(', ');
    super(
      `the database at ${where} is not migrated for this build of Baton (pending: ${shown}), and BATON_MIGRATE=off keeps this process from migrating it: ` +
        'run `baton migrate` with a role that may create tables, then try again',
    );
  }
}
