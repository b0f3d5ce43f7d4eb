// Query, subscription and type resolvers over the read model. Fields whose names match the row
// (camelCase columns) need no resolver; nested reads go through the request's DataLoaders.
import type { GraphQLResolveInfo } from 'graphql';
import { isStalled, type ExecutionRow } from '../../projections/executions.ts';
import { offerKey, waitingReason } from '../liveness/waiting-reason.ts';
import { namespaceRateLimitReason, rateLimitReason } from '../liveness/rate-limit-wait.ts';
import { rateBucketsOf } from '../runtime/rate-buckets.ts';
import type { WorkerRow } from '../../projections/workers.ts';
import { MAX_EVENTS_LIMIT, MAX_PAGE_SIZE, intInRange, textArg, uuidArg } from './arguments.ts';
import { eventStoreOf, type ApiContext } from './context.ts';
import { decodeCursor, encodeCursor } from './cursor.ts';
import { deadLetterResolvers } from './dead-letters.ts';
import { ApiError, badInput } from './errors.ts';
import { inScope } from './namespace-tokens.ts';
import { under } from '../input/errors.ts';
import { tagsProblems } from '../input/tags.ts';
import { historyResolvers } from './history.ts';
import { archivedEvents, archivedExecution, eventRowOf, isArchivedRow, workflowIdProblem } from './archived.ts';
import { executionStreamId } from '../../schemas/events.ts';
import { namespaceOr } from '../input/namespace.ts';
import type { StoredEvent } from '../eventstore/event-store.ts';
import type { ArchivedStream } from '../retention/store-side.ts';
import { workflowResolvers } from './workflows.ts';
import { workflowListResolvers } from './workflow-list.ts';
import { actionTimelineResolvers } from './action-timeline.ts';
import { whatIfResolvers } from './what-if.ts';
import { scheduleResolvers } from './schedules.ts';
import { rateLimitResolvers } from './rate-limits.ts';
import { mutationResolvers } from './mutations.ts';
import {
  HELD_STATUSES,
  listActionStats,
  listExecutions,
  listWorkers,
  type CappedExecutionRow,
  type EventRow,
  type EventValueColumn,
  type ExecutionFilter,
  type ExecutionValueColumn,
} from './read-model-queries.ts';
import { boundedJson, type WholeArgs } from './response-budget.ts';
import { DateTimeScalar, JsonScalar, LongScalar } from './scalars.ts';

interface EventWindow {
  fromRevision: number;
  limit: number;
}

function eventWindow(a: EventWindow): EventWindow {
  return {
    fromRevision: intInRange(a.fromRevision, 'fromRevision', 0, Number.MAX_SAFE_INTEGER),
    limit: intInRange(a.limit, 'limit', 1, MAX_EVENTS_LIMIT),
  };
}

// The read model's large JSON values: capped in the row (its `<field>Bytes` says how large),
// read whole through the request's loaders only when the response wants and can afford them.
const executionJson =
  (field: 'input' | 'result' | 'error' | 'lastProgress', column: ExecutionValueColumn) =>
  (row: CappedExecutionRow, args: WholeArgs, ctx: ApiContext, info: GraphQLResolveInfo) =>
    boundedJson({ value: row[field], bytes: row[`${field}Bytes`], loadWhole: () => ctx.loaders.executionValue(column).load(row.executionId), errors: field === 'error' ? 'error' : undefined }, args, ctx, info);
const eventJson =
  (field: EventValueColumn) =>
  (row: EventRow, args: WholeArgs, ctx: ApiContext, info: GraphQLResolveInfo) =>
    boundedJson({ value: row[field], bytes: row[`${field}Bytes`], loadWhole: () => ctx.loaders.eventValue(field).load(`${row.executionId}:${row.revision}`), errors: field === 'data' ? 'error-key' : undefined }, args, ctx, info);

/** The row, unless the caller's token is limited to namespaces and this is none of them. */
function visible<R extends { namespace: string }>(row: R | null | undefined, ctx: ApiContext): R | null {
  return row && inScope(ctx.namespaces, row.namespace) ? row : null;
}

/** filter.tags: checked by the tag rules, each problem named (`filter.tags.customer: …`). */
function tagsFilter(tags: unknown): Record<string, string> | undefined {
  if (tags == null) return undefined;
  const problems = under('filter.tags', tagsProblems(tags));
  if (problems.length > 0) throw new ApiError('BAD_USER_INPUT', problems.map((p) => `${p.path}: ${p.message}`).join('; '), 'filter.tags', { problems });
  return tags as Record<string, string>;
}

/** The execution's first event from the event store (the read model may not show it yet); [] when the store has none (or retention removed it). */
const storedStart = (ctx: ApiContext, executionId: string): Promise<StoredEvent[]> => eventStoreOf(ctx).readStream(executionStreamId(executionId), { limit: 1 });

/**
 * `events(executionId)` of an id the read model has no row for: an archived execution's from its
 * file, one the projector has not reached yet from the event store, else NOT_FOUND naming the
 * argument (saying so when the id is a workflow's). Another namespace's execution is, to a token
 * limited to namespaces, not found with the same words.
 */
async function eventsOfUnprojected(ctx: ApiContext, id: string, w: EventWindow): Promise<EventRow[]> {
  const notFound = (message = `executionId: no execution ${id}`) => new ApiError('NOT_FOUND', message, 'executionId');
  const archived = await archivedExecution(ctx, id);
  if (archived) {
    if (!visible(archived, ctx)) throw notFound();
    return archivedEvents(ctx, archived, w);
  }
  const [first] = await storedStart(ctx, id);
  if (!first) throw notFound(ctx.namespaces === undefined ? await workflowIdProblem(ctx, id, 'executionId') : undefined);
  if (!inScope(ctx.namespaces, namespaceOr((first.data as { namespace?: string } | null)?.namespace))) throw notFound();
  const window = await eventStoreOf(ctx).readStream(first.streamId, { fromRevision: BigInt(w.fromRevision), limit: w.limit });
  ctx.loaders.takeEvents(window.length);
  return window.map((e) => eventRowOf(e, Number(e.globalPosition)));
}

/** One value, then the end: a subscription's answer for an execution that can change no more. */
async function* once<T>(value: T): AsyncGenerator<T> {
  yield value;
}

// Names and worker ids are bounded by the event schemas; longer values can match nothing.
const filterText = (value: string | null | undefined, name: string) => (value == null ? value : textArg(value, name, 500));

export const resolvers = {
  JSON: JsonScalar,
  DateTime: DateTimeScalar,
  Long: LongScalar,

  Query: {
    // Another namespace's execution is, to a token limited to namespaces, no execution at all.
    async execution(_: unknown, a: { id: string }, ctx: ApiContext) {
      const id = uuidArg(a.id, 'id');
      return visible((await ctx.loaders.execution.load(id)) ?? (await archivedExecution(ctx, id)), ctx);
    },

    async executions(_: unknown, a: { filter?: ExecutionFilter | null; first: number; after?: string | null }, ctx: ApiContext) {
      const first = intInRange(a.first, 'first', 1, MAX_PAGE_SIZE);
      const after = a.after == null ? undefined : decodeCursor(a.after, 'after');
      const f = a.filter ?? {};
      // An empty window matches nothing by construction: a mistake to say, not an empty page (as actionTimeline says).
      if (f.since != null && f.until != null && Date.parse(f.until) <= Date.parse(f.since)) {
        throw badInput('filter.until', `the window must not be empty: until (${f.until}) must be after since (${f.since})`);
      }
      const filter = {
        ...f,
        action: filterText(f.action, 'filter.action'),
        workerId: filterText(f.workerId, 'filter.workerId'),
        workflowId: filterText(f.workflowId, 'filter.workflowId'),
        tags: tagsFilter(f.tags),
        inNamespaces: ctx.namespaces ?? null,
      };
      const page = await listExecutions(ctx.pool, { filter, first, ...(after && { after }), valueCap: ctx.budget.limits.maxValueBytes });
      const edges = page.rows.map(({ row, cursor }) => ({ cursor: encodeCursor(cursor), node: row }));
      return { edges, pageInfo: { hasNextPage: page.hasNextPage, endCursor: edges.at(-1)?.cursor ?? null } };
    },

    // Like execution(id), an archived execution's come from its archive file; an id nothing knows
    // is NOT_FOUND (the list cannot be null, and [] would be an execution with no events there).
    async events(_: unknown, a: { executionId: string } & EventWindow, ctx: ApiContext) {
      const w = eventWindow(a);
      const id = uuidArg(a.executionId, 'executionId');
      const events = ctx.loaders.events(w.fromRevision, w.limit);
      if (ctx.namespaces === undefined) {
        const rows = await events.load(id);
        if (rows.length > 0) return rows; // the usual case: one query
      }
      const row = await ctx.loaders.execution.load(id);
      if (!row) return eventsOfUnprojected(ctx, id, w);
      if (!visible(row, ctx)) throw new ApiError('NOT_FOUND', `executionId: no execution ${id}`, 'executionId');
      return events.load(id); // the same loader: read once
    },

    workers: (_: unknown, _a: unknown, ctx: ApiContext) => listWorkers(ctx.pool, ctx.staleAfterMs),

    actionStats: (_: unknown, a: { action?: string | null }, ctx: ApiContext) => listActionStats(ctx.pool, filterText(a.action, 'action')),

    // What this request's token may do, for a client (the console) to offer only what will be answered.
    access: (_: unknown, _a: unknown, ctx: ApiContext) => ({ mayChange: ctx.role === 'admin', namespaces: ctx.namespaces ?? null }),

    ...deadLetterResolvers.Query,
    ...historyResolvers.Query,
    ...workflowResolvers.Query,
    ...workflowListResolvers.Query,
    ...actionTimelineResolvers.Query,
    ...scheduleResolvers.Query,
    ...rateLimitResolvers.Query,
  },

  Execution: {
    id: (row: ExecutionRow) => row.executionId,
    archived: (row: ExecutionRow & { archived?: ArchivedStream }) => row.archived ?? null,
    input: executionJson('input', 'input'),
    result: executionJson('result', 'result'),
    error: executionJson('error', 'error'),
    lastProgress: executionJson('lastProgress', 'last_progress'),
    stalled: (row: ExecutionRow) => isStalled(row, Date.now()),
    async waitingReason(row: ExecutionRow, _a: unknown, ctx: ApiContext) {
      if (row.status !== 'Requested') return null;
      const offer = await ctx.loaders.offering(ctx.staleAfterMs).load(offerKey(row));
      const reason = waitingReason(row, offer ?? undefined, Date.now());
      if (reason !== null) return reason;
      const buckets = rateBucketsOf(ctx.runtime.store);
      const policy = await ctx.loaders.rateLimit.load(row.action);
      return (
        (await namespaceRateLimitReason(buckets, row.namespace, ctx.namespaceRateLimits, Date.now())) ??
        (policy && (await rateLimitReason(buckets, { action: row.action, input: () => row.input }, policy, Date.now())))
      );
    },
    lastHeartbeatAt(row: ExecutionRow, _a: unknown, ctx: ApiContext) {
      const held = row.workerId !== null && (HELD_STATUSES as readonly string[]).includes(row.status);
      return held ? ctx.loaders.heartbeat.load(row.workerId!) : null;
    },
    events(row: ExecutionRow, a: EventWindow, ctx: ApiContext) {
      const w = eventWindow(a);
      if (isArchivedRow(row)) return archivedEvents(ctx, row, w); // from its archive file, as its history is
      return ctx.loaders.events(w.fromRevision, w.limit).load(row.executionId);
    },
    ...historyResolvers.Execution,
    ...whatIfResolvers.Execution,
  },

  ExecutionEvent: {
    data: eventJson('data'),
    metadata: eventJson('metadata'),
  },

  Worker: {
    id: (row: WorkerRow) => row.workerId,
  },

  HistoryStep: historyResolvers.HistoryStep,
  ExecutionState: historyResolvers.ExecutionState,

  DeadLetter: deadLetterResolvers.DeadLetter,

  Mutation: { ...mutationResolvers, ...deadLetterResolvers.Mutation, ...workflowResolvers.Mutation, ...scheduleResolvers.Mutation },

  Schedule: scheduleResolvers.Schedule,

  Workflow: workflowResolvers.Workflow,
  WorkflowStep: workflowResolvers.WorkflowStep,
  WorkflowSummary: workflowListResolvers.WorkflowSummary,
  WhatIfStep: whatIfResolvers.WhatIfStep,

  Subscription: {
    executionUpdated: {
      async subscribe(_: unknown, a: { id: string }, ctx: ApiContext) {
        const id = uuidArg(a.id, 'id');
        await ctx.updates.ready();
        // Neither in the read model nor in the store: an archived execution answers its final state
        // from its file at once and ends (ARCHIVED when the file cannot be read), and a workflow's
        // id is refused at once; any other id is followed (the wait and NOT_FOUND of live-updates.ts).
        // When the store cannot say, follow: ending a real execution's subscription is worse.
        if (!(await ctx.loaders.execution.load(id)) && (await storedStart(ctx, id).catch(() => undefined))?.length === 0) {
          const archived = await archivedExecution(ctx, id);
          if (archived && visible(archived, ctx)) return once(archived);
          const workflow = !archived && ctx.namespaces === undefined ? await workflowIdProblem(ctx, id, 'id').catch(() => undefined) : undefined;
          if (workflow) throw new ApiError('NOT_FOUND', workflow, 'id');
        }
        return ctx.updates.follow(id, ctx.client, (namespace) => inScope(ctx.namespaces, namespace));
      },
      // Each event is its own response: a fresh budget and loaders (a cached row is stale by now).
      resolve(row: ExecutionRow | ApiError, _a: unknown, ctx: ApiContext) {
        if (row instanceof ApiError) throw row; // NOT_FOUND: the subscription ends with it
        if (!visible(row, ctx)) throw new ApiError('NOT_FOUND', `no execution ${row.executionId}`);
        ctx.renew();
        return row;
      },
    },
  },
};
