// Typed errors. Each says who throws it and what the caller can do about it.
import type { z } from 'zod';
import { zodProblems } from './input/schemas.ts';

/** The base of every error Baton throws on purpose; `name` is the subclass's name. */
export class BatonError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** Thrown by an EventStore when the stream is not at the revision the append expected. */
export class WrongExpectedRevisionError extends BatonError {
  constructor(
    readonly streamId: string,
    readonly expected: bigint | 'no_stream' | 'any',
    readonly actual: bigint | 'no_stream',
  ) {
    super(`${streamId}: expected revision ${String(expected)}, stream is at ${String(actual)}`);
  }
}

/** Thrown when some, but not all, of an append's eventIds are already stored, or stored elsewhere. */
export class DuplicateEventIdError extends BatonError {
  constructor(readonly streamId: string, readonly eventIds: string[]) {
    super(
      `${streamId}: event id(s) ${eventIds.join(', ')} already stored in a different position; ` +
        'an idempotent retry must resend the same events to the same stream',
    );
  }
}

/** Data that does not match its schema. `issues` name each field path and the reason. */
export class InvalidEventError extends BatonError {
  constructor(readonly what: string, readonly issues: { path: string; message: string }[]) {
    super(`invalid ${what}: ${issues.map((i) => `${i.path || '(root)'}: ${i.message}`).join('; ')}`);
  }
}

/** Bad configuration; the message names the variable or option. */
export class ConfigError extends BatonError {}

/** Runtime rejections: the machine refused the command. */
export class RejectedCommandError extends BatonError {
  constructor(
    readonly executionId: string,
    readonly eventType: string,
    readonly state: string,
    reason: string,
    options?: ErrorOptions,
  ) {
    super(`execution ${executionId}: ${eventType} refused in state ${state}: ${reason}`, options);
  }
}
/** The event's `by` is not the execution's current owner. */
export class NotOwnerError extends RejectedCommandError {}
/** The event is not allowed in the current state (or its data does not fit it). */
export class InvalidTransitionError extends RejectedCommandError {}
/** The execution is in a final state; nothing moves it any more. */
export class AlreadyFinalError extends RejectedCommandError {}

/** The worker machine refused an event on a worker's own stream (`worker-<id>`). */
export class WorkerEventRefusedError extends BatonError {
  constructor(
    readonly workerId: string,
    readonly eventType: string,
    /** The worker's state as its stream says: Active, Draining, Stopped, Lost, … */
    readonly state: string,
    reason: string,
  ) {
    super(`worker ${workerId}: ${eventType} refused in state ${state}: ${reason}`);
  }
}

/** No such execution (or worker, workflow: `what`) with this id. */
export class NotFoundError extends BatonError {
  constructor(readonly what: string, readonly id: string) {
    super(`${what} ${id} not found`);
  }
}

/** The same idempotency key was submitted with a different request. */
export class IdempotencyKeyConflictError extends BatonError {
  constructor(readonly key: string, readonly executionId: string, detail: string) {
    super(`idempotency key "${key}" already used by execution ${executionId} with a different request (${detail})`);
  }
}

/** zod's issues with dotted paths; with `schema`, an unknown field names the known one probably meant. */
export function zodIssues(error: z.ZodError, schema?: z.ZodType): { path: string; message: string }[] {
  return zodProblems(error, schema);
}

/** Parse with a zod schema, throwing InvalidEventError that names each bad field. */
export function parseOrThrow<S extends z.ZodType>(schema: S, value: unknown, what: string): z.infer<S> {
  const r = schema.safeParse(value);
  if (!r.success) throw new InvalidEventError(what, zodIssues(r.error));
  return r.data;
}

export function isBatonError(e: unknown): e is BatonError {
  return e instanceof BatonError;
}
