// The package's root (`import { createClient, defineAction } from '@baton-run/baton'`): define
// actions, submit and follow executions, and catch Baton's typed errors. Workers embedded in
// your own process come from `@baton-run/baton/worker`; test helpers from `@baton-run/baton/testing`.
// Everything exported here is public: breaking changes to it are listed in CHANGELOG.md.
export { createClient } from './client/index.ts';
export type {
  BatonClient,
  CancelOutcome,
  ClientOptions,
  DatabaseClientOptions,
  ExecutionErrorInfo,
  ExecutionId,
  ExecutionStatus,
  ExecutionView,
  GraphQLClientOptions,
  HistoryEntry,
  InputOf,
  OutputOf,
  SubmitItem,
  SubmitOptions,
  Submitted,
} from './client/types.ts';
export { FINAL_STATUSES, SUBMIT_BATCH } from './client/types.ts';
export { BatonApiError, ExecutionFailedError, ResultTimeoutError } from './client/errors.ts';
export { SubmitManyError, type SubmitManyResult } from './client/submit-many.ts';
export {
  ActionError,
  InvalidActionDefinitionError,
  InvalidActionInputError,
  defineAction,
  isActionDefinition,
  type ActionContext,
  type ActionDefinition,
  type ActionErrorOptions,
  type ActionSpec,
  type AnyActionDefinition,
  type RetryPolicy,
  type RetryPolicyInput,
} from './actions/action.ts';
export {
  AlreadyFinalError,
  BatonError,
  ConfigError,
  IdempotencyKeyConflictError,
  InvalidEventError,
  InvalidTransitionError,
  NotFoundError,
  NotOwnerError,
  RejectedCommandError,
  isBatonError,
} from './errors.ts';
export { InvalidInputError, type InputProblem } from './input/errors.ts';
// What reading a history a newer Baton wrote throws (client.history() over the database, expectHistoryReplays reports it).
export { UnknownMachineVersionError } from '../actors/execution-machine-versions.ts';
// What the database-mode client throws for an execution retention archived whose file it cannot read.
export { ArchivedError } from './retention/archived-history.ts';
// What starting an embedded worker (`@baton-run/baton/worker`, which exports them too) or opening a client can throw.
export { DuplicateActionError } from './actions/registry.ts';
export { DatabaseUnavailableError } from './db/database-unavailable.ts';
export { DatabaseNotMigratedError } from './db/database-not-migrated.ts';
export { PortUnavailableError } from './observability/listen.ts';
export { WorkerIdInUseError } from './worker/worker-id-in-use.ts';
