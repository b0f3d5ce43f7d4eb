// What a submission records (its ExecutionRequested's data), and when two submissions with one
// idempotency key ask for the same execution. One rule for every place that compares them: a key
// repeated inside one batch (the up-front check of the API, the CLI and the client, and the
// runtime's submitMany) and a key found in the store (a later batch). Compared as recorded, so a
// difference the record does not keep (an empty `tags`, `input` left out or null) is none.
import type { ExecutionEventOf } from '../../schemas/events.ts';
import { sameJson } from '../input/rules.ts';
import { DEFAULT_NAMESPACE } from '../input/namespace.ts';
import type { SubmitRequest } from './execution-runtime.ts';

export type RequestedData = ExecutionEventOf<'ExecutionRequested'>['data'];

/** The fields an idempotency key's second use must repeat exactly. */
const KEYED_FIELDS = ['action', 'input', 'maxAttempts', 'maxAttemptsIsDefault', 'priority', 'parentId', 'workflowId', 'tags', 'actionVersion'] as const;

/** The request as its ExecutionRequested records it; `defaultMaxAttempts` where it names no limit. */
export function requestedDataOf(request: SubmitRequest, defaultMaxAttempts: number): RequestedData {
  const key = request.idempotencyKey;
  return {
    action: request.action,
    input: (request.input ?? null) as RequestedData['input'],
    // A submission that names no limit records the default as such: the action's own limit replaces it.
    maxAttempts: request.maxAttempts ?? defaultMaxAttempts,
    ...(request.maxAttempts === undefined && { maxAttemptsIsDefault: true as const }),
    ...(key !== undefined ? { idempotencyKey: key } : {}),
    ...(request.priority !== undefined ? { priority: request.priority } : {}),
    ...(request.parentId !== undefined ? { parentId: request.parentId } : {}),
    ...(request.workflowId !== undefined ? { workflowId: request.workflowId } : {}),
    namespace: request.namespace ?? DEFAULT_NAMESPACE,
    ...(request.actionVersion !== undefined ? { actionVersion: request.actionVersion } : {}),
    ...(request.tags !== undefined && Object.keys(request.tags).length > 0 ? { tags: request.tags } : {}),
  };
}

/** A field as compared: an explicit priority 0 is the default, recorded or not (0 was recorded until 2026-11-30, when given). */
const compared = (d: RequestedData, f: (typeof KEYED_FIELDS)[number]): unknown => (f === 'priority' ? (d.priority ?? 0) : d[f]);

/**
 * The keyed fields in which two recorded requests differ (none: one key may name both), by the
 * names a submitter uses: a limit named against none (the action's own) is a difference in
 * maxAttempts, even when the two limits happen to be equal today.
 */
export const keyedDifferences = (a: RequestedData, b: RequestedData): string[] => {
  const differs = KEYED_FIELDS.filter((f) => !sameJson(compared(a, f), compared(b, f))).map((f) => (f === 'maxAttemptsIsDefault' ? 'maxAttempts' : f));
  return [...new Set(differs)];
};
