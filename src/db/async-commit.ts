/**
 * A select-list item that makes the statement's own transaction commit without waiting for its WAL
 * flush: synchronous_commit off until that commit (set_config(…, true) is transaction-local; a
 * function's SET clause would end with the function). For writes whose loss in a server crash is
 * recovered by design (a claim, an ack, a doorbell), never for an append. The next synchronous
 * commit flushes the WAL written before it, theirs included.
 */
export const ASYNC_COMMIT = `set_config('synchronous_commit', 'off', true)`;
