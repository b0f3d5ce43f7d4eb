// What one response may carry, and so what building it may cost (BATON_API_MAX_VALUE_BYTES,
// BATON_API_MAX_RESPONSE_BYTES):
// - A JSON value (result, input, error, lastProgress, event data and metadata, history context,
//   workflow definition and step results) larger than the value limit comes back, inside a
//   list, as a marker: { "$truncated": true, "bytes": N, "limit": L, "fetch": "result(whole: true)" }.
//   Outside a list (execution(id) { result }), or asked for with `whole: true`, it comes whole.
// - Every value a response carries is charged to its budget before it is built; one that does
//   not fit is never read, and the response becomes one RESPONSE_TOO_LARGE error. The finished
//   result is measured once more, so many small fields cannot pass the budget either.
// Measured (100 Completed executions with 60 KB results; `{ executions(first: 100) { edges {
// node { id result events { data } history { data context } } } } }`): before, 24.8 MB
// answers and +437 MiB RSS for four at once; with the limits, 195 KB answers and +45 to +60 MiB
// (most of it the four requests' history folds of 100 streams each).
import type { GraphQLResolveInfo } from 'graphql';
import { handleStreamOrSingleExecutionResult, type Plugin } from 'graphql-yoga';
import type { Role } from './auth.ts';
import { ApiError, codedError } from './errors.ts';
import { jsonSize } from './json-size.ts';
import { seesServerDetails, withoutStack, type ErrorPlace } from './redact.ts';

export interface ResponseLimits {
  /** A larger JSON value inside a list comes back as a TruncatedValue. */
  maxValueBytes: number;
  /** A response that would be larger is refused. */
  maxResponseBytes: number;
}

/** What a JSON value too large for a list comes back as. */
export interface TruncatedValue {
  $truncated: true;
  /** The whole value's size as JSON, in bytes. */
  bytes: number;
  /** The value limit it is over (BATON_API_MAX_VALUE_BYTES). */
  limit: number;
  /** How to ask for it whole: the field with `whole: true`, e.g. `result(whole: true)`. */
  fetch: string;
}

export const formatBytes = (n: number) =>
  n % 1024 ** 2 === 0 ? `${n / 1024 ** 2} MiB` : n % 1024 === 0 ? `${n / 1024} KiB` : `${n} bytes`;

const tooLargeMessage = (max: number) =>
  `the response would be larger than ${formatBytes(max)} (BATON_API_MAX_RESPONSE_BYTES); ask for fewer items ` +
  '(first, limit) or fewer large fields, or for a large value on its own';

/** One response's allowance. A subscription renews it for each event it sends. */
export class ResponseBudget {
  #left: number;
  #exceeded = false;

  constructor(readonly limits: ResponseLimits) {
    this.#left = limits.maxResponseBytes;
  }

  get exceeded(): boolean {
    return this.#exceeded;
  }

  get left(): number {
    return this.#left;
  }

  /** Take `bytes`, or throw RESPONSE_TOO_LARGE; once one did not fit, nothing more does. */
  take(bytes: number): void {
    if (!this.#exceeded && bytes <= this.#left) {
      this.#left -= bytes;
      return;
    }
    this.#exceeded = true;
    throw new ApiError('RESPONSE_TOO_LARGE', tooLargeMessage(this.limits.maxResponseBytes));
  }
}

export interface BudgetContext {
  budget: ResponseBudget;
  role: Role;
  namespaces?: readonly string[] | undefined;
}

export interface WholeArgs {
  whole?: boolean | null;
}

export interface JsonSource {
  value: unknown;
  /** Its size when already known (the read model's values, measured by Postgres); else measured here. */
  bytes?: number | null | undefined;
  /** Reads the value whole when the row left it out (its bytes are over the value limit). */
  loadWhole?: () => Promise<unknown>;
  /** Where it may hold a failed action's ErrorInfo, whose stack only the unscoped admin sees. */
  errors?: ErrorPlace;
}

/** True when the field sits inside a list (a page's edges, an execution's events, a workflow's steps). */
const inList = (path: GraphQLResolveInfo['path'] | undefined): boolean => path !== undefined && (typeof path.key === 'number' || inList(path.prev));

/**
 * A JSON field's value within the response's budget: the value, or a TruncatedValue in a list
 * unless asked for whole; without the stack of an ErrorInfo it holds for all but the unscoped admin.
 */
export async function boundedJson(source: JsonSource, args: WholeArgs, ctx: BudgetContext, info: GraphQLResolveInfo): Promise<unknown> {
  const { budget } = ctx;
  const limit = budget.limits.maxValueBytes;
  const leftOut = (source.bytes ?? 0) > limit && source.loadWhole !== undefined;
  if (source.value === undefined || (source.value === null && !leftOut)) return null;
  const wanted = args.whole === true || !inList(info.path);
  const bytes = source.bytes ?? jsonSize(source.value, wanted ? budget.left : Number.POSITIVE_INFINITY);
  if (bytes > limit && !wanted) {
    const marker: TruncatedValue = { $truncated: true, bytes, limit, fetch: `${info.fieldName}(whole: true)` };
    budget.take(jsonSize(marker));
    return marker;
  }
  budget.take(bytes);
  const value = leftOut ? ((await source.loadWhole!()) ?? null) : source.value;
  return source.errors === undefined || seesServerDetails(ctx) ? value : withoutStack(value, source.errors);
}

/** A resolver for a JSON field read from an in-memory value (folded histories, workflows). */
export const jsonField =
  <S>(get: (source: S) => unknown, errors?: ErrorPlace) =>
  (source: S, args: WholeArgs, ctx: BudgetContext, info: GraphQLResolveInfo) =>
    boundedJson({ value: get(source), errors }, args, ctx, info);

/**
 * Refuses a finished response over the budget: one that a value could not fit into, or one
 * whose many small fields add up past it. For a subscription, each event on its own.
 */
export function useResponseBudget(): Plugin {
  const settle =
    (ctx: Partial<BudgetContext> | undefined) =>
    ({ result, setResult }: { result: unknown; setResult: (r: { errors: unknown[] }) => void }) => {
      const budget = ctx?.budget;
      if (!budget) return;
      const max = budget.limits.maxResponseBytes;
      if (budget.exceeded || jsonSize(result, max) > max) {
        setResult({ errors: [codedError('RESPONSE_TOO_LARGE', tooLargeMessage(max), { limit: max })] });
      }
    };
  return {
    onExecute: ({ args }) => ({
      onExecuteDone: (payload) => handleStreamOrSingleExecutionResult(payload, settle(args.contextValue as Partial<BudgetContext>) as never),
    }),
    onSubscribe: ({ args }) => ({
      onSubscribeResult: (payload) => handleStreamOrSingleExecutionResult(payload, settle(args.contextValue as Partial<BudgetContext>) as never),
    }),
  };
}
