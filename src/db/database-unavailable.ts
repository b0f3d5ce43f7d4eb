// Kept apart from connect.ts, which imports pg: the package root exports this class, and its
// declarations must not need @types/pg in a project that installs the package.
import { BatonError } from '../errors.ts';

/** The database server could not be reached or refused us; the message names the URL (no password) and its source. */
export class DatabaseUnavailableError extends BatonError {}
